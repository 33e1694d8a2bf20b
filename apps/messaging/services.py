"""Every write to channels, and every send through them.

Each change is atomic, validated as a whole, audited (without the secret or header values: whether a
secret is set, whether it changed, header names) and published on the tenant's ``messaging`` topic
after commit. A channel's topics decide which tools a call may use, so a change to them (or to the
channel's name) raises the tenant's configuration version (``config_changed``).

Sends (:func:`send_message`, :func:`create_forum_topic`, :func:`channel_test`) talk to the network
outside any transaction, then record an :class:`OutboundMessage` (sent or failed), audit it (the size
and digest of the text, never the secrets) and publish it.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.services import record_and_publish
from apps.messaging import validation
from apps.messaging.errors import MessagingErrorCode
from apps.messaging.models import MAX_ERROR_CHARS, MAX_TEXT_CHARS, TELEGRAM_API_BASE, Channel, OutboundMessage
from apps.messaging.senders import Outgoing, SendError, sender_for
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError, invalid_fields
from apps.tenants.services import config_changed

TOPIC = "messaging"
FIELDS = (
    "name",
    "kind",
    "enabled",
    "url",
    "secret",
    "extra_headers",
    "default_chat_id",
    "topics",
    "agent_keys",
)
MIN_SECRET_FOR_HINT = 12  # the last 4 characters of a shorter secret would give away too much of it
TEST_TEXT = "Toolgate test message from channel {name}."


def secret_hint(secret: str) -> str:
    """The last four characters of a secret long enough to show them (else "")."""
    return secret[-4:] if len(secret) >= MIN_SECRET_FOR_HINT else ""


def channel_data(channel: Channel) -> dict[str, Any]:
    """What may be shown, published and audited of a channel: never the secret nor a header value."""
    return {
        "id": str(channel.pk),
        "name": channel.name,
        "kind": channel.kind,
        "enabled": channel.enabled,
        "url": channel.url,
        "secret_set": bool(channel.secret),
        "extra_headers": sorted(channel.extra_headers),
        "default_chat_id": channel.default_chat_id,
        "topics": dict(channel.topics),
        "agent_keys": list(channel.agent_keys),
        "created_by": channel.created_by,
    }


def message_data(message: OutboundMessage) -> dict[str, Any]:
    """An outbound message as published and audited: its size and digest, not its text."""
    return {
        "id": str(message.pk),
        "channel_id": str(message.channel_id) if message.channel_id else None,
        "channel": message.channel_name,
        "kind": message.kind,
        "agent": message.agent_key,
        "chat_id": message.chat_id,
        "text_bytes": message.text_bytes,
        "text_sha256": message.text_sha256,
        "status": message.status,
        "error": message.error,
        "provider_message_id": message.provider_message_id,
        "latency_ms": message.latency_ms,
    }


def _duplicate(name: str) -> Conflict:
    return Conflict(
        MessagingErrorCode.DUPLICATE_NAME,
        f"name: a channel named {name!r} exists already.",
        details={"name": ["in use by another channel of this tenant."]},
    )


def _save(channel: Channel) -> None:
    try:
        with transaction.atomic():
            channel.save()
    except IntegrityError:
        raise _duplicate(channel.name) from None


def _apply(channel: Channel, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name == "extra_headers":
            channel.extra_headers = dict(value)
        elif name == "url":
            channel.url = value.rstrip("/") if channel.kind == Channel.Kind.TELEGRAM else value
        elif name == "topics":
            channel.topics = {str(k): list(v) for k, v in value.items()}
        elif name == "agent_keys":
            channel.agent_keys = list(value)
        else:
            setattr(channel, name, value)


@transaction.atomic
def channel_create(
    *,
    actor: Actor,
    name: str,
    kind: str,
    url: str = "",
    secret: str = "",
    extra_headers: dict[str, str] | None = None,
    default_chat_id: str = "",
    topics: dict[str, list[str]] | None = None,
    agent_keys: list[str] | None = None,
    enabled: bool = True,
) -> Channel:
    """Add a channel. A Telegram channel needs its bot token (``secret``) and uses
    https://api.telegram.org unless ``url`` names another Bot API server. Invalid fields are 400 by
    field; a name in use is 409."""
    if kind == Channel.Kind.TELEGRAM and not url:
        url = TELEGRAM_API_BASE
    values: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "enabled": enabled,
        "url": url,
        "secret": secret,
        "extra_headers": extra_headers or {},
        "default_chat_id": default_chat_id,
        "topics": topics or {},
        "agent_keys": agent_keys or [],
    }
    tenant = actor.tenant
    errors = validation.check_channel(values, kind=kind, tenant=tenant)
    if kind == Channel.Kind.TELEGRAM and not secret and "secret" not in errors:
        errors["secret"] = ["required: the bot token BotFather gave."]
    if errors:
        raise invalid_fields(errors)
    if Channel.objects.for_tenant(tenant).filter(name=name).exists():
        raise _duplicate(name)
    channel = Channel(tenant=tenant, kind=kind, created_by=actor.label[:255])
    _apply(channel, values)
    _save(channel)
    if channel.topics:
        config_changed(tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="messaging.channel.created",
        target_type="messaging_channel",
        target_id=str(channel.pk),
        data=channel_data(channel),
    )
    return channel


@transaction.atomic
def channel_update(*, actor: Actor, channel: Channel, **changes: Any) -> Channel:
    """Change any field but the kind. ``secret``: absent keeps the stored one, ``""`` clears it (a
    Telegram channel keeps a token). ``extra_headers``, ``topics`` and ``agent_keys`` replace the
    stored ones."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise invalid_fields({sorted(unknown)[0]: ["unknown field."]})
    tenant = actor.tenant
    current = Channel.objects.for_tenant(tenant).select_for_update().filter(pk=channel.pk).first()
    if current is None:
        raise ServiceError(ErrorCode.NOT_FOUND, "No channel with this id.", status=404)
    if "kind" in changes and changes["kind"] != current.kind:
        raise invalid_fields({"kind": ["cannot be changed; add a new channel of the other kind."]})
    changes.pop("kind", None)
    errors = validation.check_channel(changes, kind=current.kind, tenant=tenant)
    if current.kind == Channel.Kind.TELEGRAM and changes.get("secret") == "" and "secret" not in errors:
        errors["secret"] = ["a Telegram channel needs its bot token; leave it out to keep the stored one."]
    if errors:
        raise invalid_fields(errors)
    if (
        "name" in changes
        and Channel.objects.for_tenant(tenant).exclude(pk=current.pk).filter(name=changes["name"]).exists()
    ):
        raise _duplicate(changes["name"])
    before = channel_data(current)
    old_secret, old_headers = current.secret, current.extra_headers
    _apply(current, changes)
    after = channel_data(current)
    secret_changed = current.secret != old_secret
    changed = sorted(k for k in after if before[k] != after[k])
    if secret_changed:
        changed.append("secret")
    if current.extra_headers != old_headers and "extra_headers" not in changed:
        changed.append("extra_headers")
    if not changed:
        return current
    _save(current)
    if {"topics", "name"} & set(changed) and (current.topics or before["topics"]):
        config_changed(tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="messaging.channel.updated",
        target_type="messaging_channel",
        target_id=str(current.pk),
        data={**after, "changed": sorted(changed), "secret_changed": secret_changed},
    )
    return current


@transaction.atomic
def channel_delete(*, actor: Actor, channel: Channel) -> None:
    """Delete a channel (its outbound log stays, naming it). The tools answer that it is unknown."""
    data = channel_data(channel)
    Channel.objects.for_tenant(actor.tenant).filter(pk=channel.pk).delete()
    if data["topics"]:
        config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="messaging.channel.deleted",
        target_type="messaging_channel",
        target_id=data["id"],
        data=data,
    )


# --- sending ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A send's result: the logged message, and the thread id for a new forum topic."""

    message: OutboundMessage
    thread_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.message.status == OutboundMessage.Status.SENT


def _log(
    *,
    actor: Actor,
    channel: Channel,
    kind: str,
    outgoing: Outgoing,
    started: float,
    error: str = "",
    message_id: str = "",
) -> OutboundMessage:
    encoded = outgoing.text.encode()
    message = OutboundMessage(
        tenant=actor.tenant,
        channel=channel,
        channel_name=channel.name,
        kind=kind,
        agent_key=outgoing.agent[:200],
        session_key=outgoing.session_key[:200],
        user_id=outgoing.user_id[:200],
        chat_id=outgoing.chat_id[:100],
        text=outgoing.text[:MAX_TEXT_CHARS],
        text_bytes=len(encoded),
        text_sha256=hashlib.sha256(encoded).hexdigest(),
        status=OutboundMessage.Status.FAILED if error else OutboundMessage.Status.SENT,
        error=error[:MAX_ERROR_CHARS],
        provider_message_id=message_id[:100],
        latency_ms=int((time.monotonic() - started) * 1000),
    )
    with transaction.atomic():
        # The channel may have been deleted while the request was out: keep the row, naming it.
        if not Channel.objects.for_tenant(actor.tenant).filter(pk=channel.pk).exists():
            message.channel = None
        message.save()
        verb = "messaging.message." + ("failed" if error else "sent")
        record_and_publish(
            actor=actor,
            topic=TOPIC,
            verb=verb,
            target_type="messaging_message",
            target_id=str(message.pk),
            data=message_data(message),
        )
    return message


def send_message(*, actor: Actor, channel: Channel, outgoing: Outgoing, kind: str = "message") -> Outcome:
    """Send ``outgoing`` through ``channel`` and log it (sent or failed, with the error)."""
    if len(outgoing.text) > MAX_TEXT_CHARS:
        raise ServiceError(ErrorCode.INVALID, f"text: at most {MAX_TEXT_CHARS} characters.")
    sender = sender_for(channel)
    started = time.monotonic()
    try:
        sent = sender.send(outgoing)
    except SendError as exc:
        return Outcome(
            _log(
                actor=actor,
                channel=channel,
                kind=kind,
                outgoing=outgoing,
                started=started,
                error=sender.redact(exc.message),
            )
        )
    return Outcome(
        _log(
            actor=actor,
            channel=channel,
            kind=kind,
            outgoing=outgoing,
            started=started,
            message_id=sent.message_id,
        )
    )


def create_forum_topic(
    *, actor: Actor, channel: Channel, chat_id: str, name: str, icon_color: int | None, agent: str = ""
) -> Outcome:
    """Create a forum topic named ``name`` in the Telegram chat ``chat_id`` and log it."""
    sender = sender_for(channel)
    outgoing = Outgoing(chat_id=chat_id, text=name, agent=agent)
    started = time.monotonic()
    try:
        thread_id = sender.create_forum_topic(chat_id, name, icon_color)
    except SendError as exc:
        return Outcome(
            _log(
                actor=actor,
                channel=channel,
                kind=OutboundMessage.Kind.FORUM_TOPIC,
                outgoing=outgoing,
                started=started,
                error=sender.redact(exc.message),
            )
        )
    message = _log(
        actor=actor,
        channel=channel,
        kind=OutboundMessage.Kind.FORUM_TOPIC,
        outgoing=outgoing,
        started=started,
        message_id=str(thread_id),
    )
    return Outcome(message, thread_id=thread_id)


def channel_test(*, actor: Actor, channel: Channel, chat_id: str = "") -> dict[str, Any]:
    """Send a test message to ``chat_id`` (default: the channel's default chat). Answers ``ok``,
    ``latency_ms``, ``chat_id``, ``message_id``, or the ``error`` (with ``status`` when the receiver
    answered). Logged, audited and published like any send."""
    chat_id = chat_id or channel.default_chat_id
    if channel.kind == Channel.Kind.TELEGRAM and not chat_id:
        raise ServiceError(
            ErrorCode.INVALID,
            "chat_id: required: the channel has no default chat.",
            details={"chat_id": ["required: the channel has no default chat."]},
        )
    problem = validation.chat_id_error(chat_id, channel.kind)
    if problem:
        raise ServiceError(ErrorCode.INVALID, f"chat_id: {problem}", details={"chat_id": [problem]})
    outgoing = Outgoing(chat_id=chat_id, text=TEST_TEXT.format(name=channel.name), agent="")
    outcome = send_message(actor=actor, channel=channel, outgoing=outgoing, kind=OutboundMessage.Kind.TEST)
    message = outcome.message
    return {
        "ok": outcome.ok,
        "latency_ms": message.latency_ms,
        "chat_id": message.chat_id,
        "message_id": message.provider_message_id,
        "error": message.error,
    }
