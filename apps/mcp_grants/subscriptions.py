"""Resource subscriptions through ``/mcp/<agent>/`` (README "Resources, prompts and completion").

A subscription is a row (:class:`ResourceSubscription`): who subscribed (API key or user, for which
agent) to which URI of which server. The first subscriber of a URI subscribes the server's connection
in this process (``resources/subscribe``); the last one to leave unsubscribes it. When a connection's
server says a resource changed (``notifications/resources/updated``), :func:`updated` finds that
URI's subscribers on that connection and sends the notification to each one's update stream: a
channel-layer group per tenant, subscriber and agent (:func:`group`), which ``GET /mcp/<agent>/`` of
that key (on any web worker) streams to its client.

Stdio servers run once per process: a subscription made through one web worker watches the server of
that worker. An unsubscribe that reaches another worker removes the row, so updates stop reaching the
client at once; the first worker's server may keep watching until its connection closes.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction

from apps.mcp_grants.models import MCPServer, ResourceSubscription
from apps.realtime import events
from apps.tenants.models import Agent

MAX_PER_SUBSCRIBER = 100  # subscriptions of one key (or user) for one agent
UPDATED = "notifications/resources/updated"


class TooMany(Exception):
    pass


def group(tenant_id: str, actor_id: str, agent_key: str) -> str:
    """The channel-layer group of one subscriber's updates for one agent (names are bounded, so the
    three parts are hashed; the tenant is one of them)."""
    digest = hashlib.sha256(f"{tenant_id}|{actor_id}|{agent_key}".encode()).hexdigest()[:40]
    return f"mcp-updates.{digest}"


LIST_CHANGED = (
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
)


def changes_group(tenant_id: str) -> str:
    """The channel-layer group told when what the tenant's agents may use may have changed."""
    return f"mcp-changes.{tenant_id}"


def stream_groups(tenant_id: str, actor_id: str, agent_key: str) -> list[str]:
    """The groups an update stream of one subscriber for one agent listens to: its own updates, and
    its tenant's list changes."""
    return [group(tenant_id, actor_id, agent_key), changes_group(tenant_id)]


LISTS_CHANGED = "lists_changed"  # one message for the three notifications of LIST_CHANGED


def lists_changed(sender: Any, tenant: Any, **kwargs: Any) -> None:
    """``tools_may_have_changed`` (``apps.tenants.services``): the update streams of the tenant's MCP
    clients are told their tools, prompts and resources may have changed, once the change commits."""
    message = {"type": "mcp.notification", "method": LISTS_CHANGED}
    events.deliver_after_commit(changes_group(str(tenant.pk)), message)


def add(server: MCPServer, agent: Agent, actor_id: str, credential_user: str, uri: str) -> tuple[bool, bool]:
    """Record the subscription: (whether this made it, whether it is the URI's first on that
    connection: the server's own subscription is then to be made). :class:`TooMany` past
    :data:`MAX_PER_SUBSCRIBER`."""
    rows = ResourceSubscription.objects.for_tenant(server.tenant)
    mine = rows.filter(agent=agent, actor_id=actor_id)
    if mine.filter(server=server, credential_user=credential_user, uri=uri).exists():
        return False, False
    if mine.count() >= MAX_PER_SUBSCRIBER:
        raise TooMany(f"At most {MAX_PER_SUBSCRIBER} resource subscriptions per key and agent.")
    first = not rows.filter(server=server, credential_user=credential_user, uri=uri).exists()
    try:
        with transaction.atomic():
            ResourceSubscription.objects.create(
                tenant=server.tenant,
                server=server,
                agent=agent,
                actor_id=actor_id,
                credential_user=credential_user,
                uri=uri,
            )
    except IntegrityError:  # the same subscription, made at the same moment
        return False, False
    return True, first


def remove(
    server: MCPServer, agent: Agent, actor_id: str, credential_user: str, uri: str
) -> tuple[bool, bool]:
    """Remove the subscription: (whether there was one, whether the URI has no subscriber left on that
    connection: the server's own subscription is then to be ended)."""
    rows = ResourceSubscription.objects.for_tenant(server.tenant).filter(
        server=server, credential_user=credential_user, uri=uri
    )
    deleted, _ = rows.filter(agent=agent, actor_id=actor_id).delete()
    return bool(deleted), not rows.exists()


def groups_of(tenant_id: str, server_id: str, credential_user: str, uri: str) -> list[str]:
    """The update groups of a URI's subscribers on one connection."""
    rows = (
        ResourceSubscription.objects.filter(
            tenant_id=tenant_id, server_id=uuid.UUID(server_id), credential_user=credential_user, uri=uri
        )
        .select_related("agent")
        .only("actor_id", "agent__key")
    )
    return sorted({group(tenant_id, row.actor_id, row.agent.key) for row in rows})


async def send(groups: list[str], uri: str) -> None:
    """``notifications/resources/updated`` for ``uri`` to each group."""
    layer = get_channel_layer()
    if layer is None:
        return
    message: dict[str, Any] = {"type": "mcp.notification", "method": UPDATED, "params": {"uri": uri}}
    for name in groups:
        await layer.group_send(name, message)
