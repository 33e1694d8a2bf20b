"""The messaging tools: ``message`` (send text to a channel's chat) and ``create_forum_topic`` (a new
Telegram forum topic). The channel defaults to the call's own (``context.channel``), the chat to the
call's chat when that is the channel's, else to the channel's default chat. Every send is logged as an
outbound message (sent or failed) and published on the ``messaging`` topic; the channel's secrets are
registered with the call's scrubber first, so no answer can carry them."""

from __future__ import annotations

import logging
from typing import Any

from apps.messaging import selectors, services, validation
from apps.messaging.models import MAX_TEXT_CHARS, Channel
from apps.messaging.senders import TOPIC_COLORS, Outgoing, parse_telegram_chat
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult

logger = logging.getLogger(__name__)
MAX_TOPIC_NAME = 128
MAX_NAMES_SHOWN = 20


class _Refused(Exception):
    """A call that cannot be sent; the message is the error result."""


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Refused(f"argument {name!r} must be a string.")
    return value.strip()


def _channel(ctx: CallContext, args: dict[str, Any]) -> Channel:
    name = _text(args, "channel") or ctx.channel
    channels = selectors.channel_list(tenant=ctx.tenant)
    if not name:
        names = [c.name for c in channels.filter(enabled=True)[:MAX_NAMES_SHOWN]]
        known = (
            f"; configured: {', '.join(names)}" if names else "; none is configured — add one under Channels"
        )
        raise _Refused(f"no channel: name one with the channel argument{known}.")
    channel = selectors.channel_by_name(tenant=ctx.tenant, name=name)
    if channel is None:
        names = [c.name for c in channels.filter(enabled=True)[:MAX_NAMES_SHOWN]]
        known = (
            f"; configured: {', '.join(names)}" if names else "; none is configured — add one under Channels"
        )
        raise _Refused(f"unknown channel {name[:64]!r}{known}.")
    if not channel.enabled:
        raise _Refused(
            f"the channel {channel.name} is disabled; an administrator can enable it under Channels."
        )
    if not channel.allows_agent(ctx.agent.key):
        raise _Refused(f"this agent may not use the channel {channel.name}; it is limited to other agents.")
    for secret in channel.secrets:
        ctx.scrubber.register(secret)
    return channel


def _chat(ctx: CallContext, args: dict[str, Any], channel: Channel) -> str:
    chat_id = _text(args, "chat_id")
    if not chat_id and ctx.channel == channel.name:
        chat_id = ctx.chat_id
    chat_id = chat_id or channel.default_chat_id
    if not chat_id:
        raise _Refused(
            f"no chat: give chat_id (the channel {channel.name} has no default chat and the call names none)."
        )
    problem = validation.chat_id_error(chat_id, channel.kind)
    if problem:
        raise _Refused(f"chat_id: {problem}")
    return chat_id


@tool("message")
def message(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Send ``text`` to a chat of a channel."""
    try:
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _Refused("argument 'text' must be a non-empty string.")
        if len(text) > MAX_TEXT_CHARS:
            raise _Refused(
                f"text is {len(text)} characters; a message holds at most {MAX_TEXT_CHARS} — "
                "send it in parts."
            )
        channel = _channel(ctx, args)
        chat_id = _chat(ctx, args, channel)
        reply_to = _text(args, "reply_to")
        if len(reply_to) > 100:
            raise _Refused("reply_to: at most 100 characters.")
        silent = args.get("silent", False)
        if not isinstance(silent, bool):
            raise _Refused("argument 'silent' must be true or false.")
        outgoing = Outgoing(
            chat_id=chat_id,
            text=text,
            agent=ctx.agent.key,
            session_key=ctx.session_key,
            user_id=ctx.user_id,
            reply_to=reply_to,
            silent=silent,
        )
        outcome = services.send_message(actor=ctx.actor, channel=channel, outgoing=outgoing)
    except (_Refused, ServiceError) as exc:
        return ToolResult.error(str(exc))
    sent = outcome.message
    if not outcome.ok:
        logger.info("message: send failed", extra={"call_id": ctx.call_id})
        return ToolResult.error(f"message failed: {sent.error}.", channel=channel.name, chat_id=chat_id)
    ref = f" (message id {sent.provider_message_id})" if sent.provider_message_id else ""
    return ToolResult.ok(
        f"Sent to {chat_id} on {channel.name}{ref}.",
        channel=channel.name,
        chat_id=chat_id,
        message_id=sent.provider_message_id,
    )


@tool("create_forum_topic")
def create_forum_topic(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Create a forum topic in a Telegram supergroup; answers its thread id and the chat id to send to."""
    try:
        name = _text(args, "name")
        if not name:
            raise _Refused("argument 'name' must be a non-empty string.")
        if len(name) > MAX_TOPIC_NAME:
            raise _Refused(f"name: at most {MAX_TOPIC_NAME} characters.")
        icon_color = args.get("icon_color")
        if icon_color is not None and (isinstance(icon_color, bool) or icon_color not in TOPIC_COLORS):
            raise _Refused(f"icon_color: one of {', '.join(str(c) for c in TOPIC_COLORS)}.")
        channel = _channel(ctx, args)
        if channel.kind != Channel.Kind.TELEGRAM:
            raise _Refused(
                f"the channel {channel.name} is a {channel.kind} channel; forum topics need a Telegram one."
            )
        chat_id = _chat(ctx, args, channel)
        chat, _thread = parse_telegram_chat(chat_id)
        outcome = services.create_forum_topic(
            actor=ctx.actor,
            channel=channel,
            chat_id=chat,
            name=name,
            icon_color=icon_color,
            agent=ctx.agent.key,
        )
    except (_Refused, ServiceError) as exc:
        return ToolResult.error(str(exc))
    if outcome.thread_id is None:
        logger.info("create_forum_topic: failed", extra={"call_id": ctx.call_id})
        return ToolResult.error(f"create_forum_topic failed: {outcome.message.error}.", channel=channel.name)
    composite = f"{chat}:topic:{outcome.thread_id}"
    return ToolResult.ok(
        f"Created the topic {name!r} in {chat} on {channel.name}: thread id {outcome.thread_id}; "
        f"send to it with chat_id {composite}.",
        channel=channel.name,
        thread_id=outcome.thread_id,
        chat_id=composite,
    )
