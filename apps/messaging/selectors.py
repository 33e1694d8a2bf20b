"""Reads of channels and their outbound log, always within one tenant (one channel for a request:
``apps.messaging.access``). :func:`topic_tool_allow` gives the tool allow list a channel sets for a chat
or forum topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from apps.messaging.models import Channel, OutboundMessage
from apps.policy import engine
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.policy.engine import CallScope, Resolved
    from apps.tenants.models import Agent, Tenant

TOPIC_SEPARATOR = ":topic:"


def channel_list(*, tenant: Tenant) -> TenantQuerySet[Channel]:
    """The tenant's channels by name."""
    return Channel.objects.for_tenant(tenant).order_by("name", "id")


def channel_by_name(*, tenant: Tenant, name: str) -> Channel | None:
    return Channel.objects.for_tenant(tenant).filter(name=name).first()


def message_list(*, tenant: Tenant, channel: Channel) -> TenantQuerySet[OutboundMessage]:
    """What was sent through ``channel``, newest first."""
    return OutboundMessage.objects.for_tenant(tenant).filter(channel=channel).order_by("-created_at", "-id")


def topic_tool_allow(tenant: Tenant, channel: str, chat_id: str) -> tuple[str, ...] | None:
    """The tool allow list the channel named ``channel`` sets for ``chat_id``: the entry for the exact
    chat or topic id, else, for a topic (``<chat>:topic:<thread>``), the entry for its chat. None when
    no channel has that name or it sets nothing for the chat (the call keeps its own allow list)."""
    if not channel or not chat_id:
        return None
    topics = Channel.objects.for_tenant(tenant).filter(name=channel).values_list("topics", flat=True).first()
    if not isinstance(topics, dict) or not topics:
        return None
    found = topics.get(chat_id)
    if found is None and TOPIC_SEPARATOR in chat_id:
        found = topics.get(chat_id.split(TOPIC_SEPARATOR, 1)[0])
    if not isinstance(found, list):
        return None
    return tuple(str(spec) for spec in found)


def call_tool_allow(
    *, tenant: Tenant, agent: Agent, scope: CallScope, tool_allow: Sequence[str] | None
) -> tuple[str, ...] | None:
    """A call's allow list with its channel topic's list applied (``groupToolAllow``): the tools both
    allow, as names, when the call's channel and chat have an entry (:func:`topic_tool_allow`); else
    ``tool_allow`` unchanged."""
    topic = topic_tool_allow(tenant, scope.channel, scope.chat_id)
    if topic is None:
        return tuple(tool_allow) if tool_allow is not None else None
    return tuple(sorted(narrowed_by_topic(engine.resolve(tenant, agent, scope), topic, tool_allow)))


def narrowed_by_topic(
    resolved: Resolved, topic: Sequence[str], tool_allow: Sequence[str] | None
) -> list[str]:
    """The tools ``resolved`` allows for a call's own ``tool_allow``, kept to those the channel topic's
    list (``topic``) allows too: the one intersection a call and a listing both make."""
    in_topic = set(resolved.allowed(topic))
    return [name for name in resolved.allowed(tool_allow) if name in in_topic]
