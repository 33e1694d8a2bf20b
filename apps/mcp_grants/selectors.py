"""Reads of MCP servers, their tools, grants, per-user credentials and access requests, always within one
tenant (one of them for a request: ``apps.mcp_grants.access``), but for the counts the operator's metrics
read."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Count

from apps.mcp_grants import naming
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
)
from apps.mcp_grants.reachability import Accessible
from apps.policy import engine
from apps.policy.universe import Universe, universe_for
from apps.tenants.roles import Role
from apps.tenants.scoping import TenantQuerySet
from apps.tools.catalog import CATALOG

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Tenant


def pending_requests(tenant: Tenant) -> TenantQuerySet[AccessRequest]:
    """The tenant's pending requests, oldest first (B §3.4 ``ListPendingRequests``)."""
    return (
        AccessRequest.objects.for_tenant(tenant)
        .filter(status=AccessRequest.Status.PENDING)
        .select_related("server", "agent")
        .order_by("created_at", "id")
    )


# --- servers and their tools ----------------------------------------------------------------------------


def server_list(*, tenant: Tenant) -> TenantQuerySet[MCPServer]:
    return MCPServer.objects.for_tenant(tenant).order_by("name", "id")


def server_tools(*, tenant: Tenant, server: MCPServer) -> TenantQuerySet[MCPServerTool]:
    """The tools discovered on ``server``, by name."""
    return MCPServerTool.objects.for_tenant(tenant).filter(server_id=server.pk).order_by("name", "id")


_UNPREFIXED: OrderedDict[tuple[object, int], dict[str, MCPServer]] = OrderedDict()
_UNPREFIXED_SIZE = 256
_UNPREFIXED_LOCK = threading.Lock()


def unprefixed_tools(tenant: Tenant) -> dict[str, MCPServer]:
    """The registered names of the tenant's unprefixed servers' tools (their own names), each with its
    server (enabled or not). Kept per process for the tenant's ``config_version``, which every change
    of a server or of its discovered tools raises."""
    key = (tenant.pk, tenant.config_version)
    with _UNPREFIXED_LOCK:
        hit = _UNPREFIXED.get(key)
        if hit is not None:
            _UNPREFIXED.move_to_end(key)
            return hit
    found: dict[str, MCPServer] = {}
    servers = {s.pk: s for s in MCPServer.objects.for_tenant(tenant).filter(prefix_tools=False)}
    if servers:
        for server_id, name in (
            MCPServerTool.objects.for_tenant(tenant)
            .filter(server_id__in=list(servers))
            .order_by("name", "id")
            .values_list("server_id", "name")
        ):
            found.setdefault(name, servers[server_id])
    with _UNPREFIXED_LOCK:
        _UNPREFIXED[key] = found
        while len(_UNPREFIXED) > _UNPREFIXED_SIZE:
            _UNPREFIXED.popitem(last=False)
    return found


def registered_tool_names(*, tenant: Tenant, exclude_server: MCPServer | None = None) -> dict[str, str]:
    """Every registered MCP tool name of the tenant (prefixed or not), each with its server's name;
    without ``exclude_server``'s."""
    servers = {s.pk: s for s in MCPServer.objects.for_tenant(tenant)}
    if exclude_server is not None:
        servers.pop(exclude_server.pk, None)
    names: dict[str, str] = {}
    for server_id, tool in (
        MCPServerTool.objects.for_tenant(tenant)
        .filter(server_id__in=list(servers))
        .order_by("name", "id")
        .values_list("server_id", "name")
    ):
        server = servers[server_id]
        names.setdefault(naming.registered_name(server, tool), server.name)
    return names


# --- grants and credentials ------------------------------------------------------------------------------


def agent_grants(*, tenant: Tenant, server: MCPServer) -> TenantQuerySet[AgentGrant]:
    return (
        AgentGrant.objects.for_tenant(tenant)
        .filter(server_id=server.pk)
        .select_related("server", "agent")
        .order_by("agent__key", "id")
    )


def user_grants(*, tenant: Tenant, server: MCPServer) -> TenantQuerySet[UserGrant]:
    return (
        UserGrant.objects.for_tenant(tenant)
        .filter(server_id=server.pk)
        .select_related("server")
        .order_by("user_id", "id")
    )


def agent_grants_of(*, tenant: Tenant, agent_id: uuid.UUID) -> TenantQuerySet[AgentGrant]:
    """Every grant an agent holds, by server name."""
    return (
        AgentGrant.objects.for_tenant(tenant)
        .filter(agent_id=agent_id)
        .select_related("server", "agent")
        .order_by("server__name", "id")
    )


@dataclass(frozen=True)
class GrantEffect:
    """What an agent grant gives once the policy has had its say, for a call without a user: the
    registered names of the server's discovered tools the grant lets through (``given``), those the
    agent's tool policy keeps (``effective``) and those it removes (``removed``)."""

    given: tuple[str, ...]
    effective: tuple[str, ...]
    removed: tuple[str, ...]


def _with_tools(universe: Universe, server_name: str, names: Iterable[str]) -> Universe:
    """``universe`` with ``names`` as tools of ``server_name`` (groups ``mcp`` and ``mcp:<server>``)."""
    added = frozenset(names)
    groups = dict(universe.groups)
    for group in ("mcp", f"mcp:{server_name}"):
        groups[group] = groups.get(group, frozenset()) | added
    return Universe(names=tuple(sorted(set(universe.names) | added)), groups=groups)


def grant_effects(*, tenant: Tenant, grants: Iterable[AgentGrant]) -> dict[uuid.UUID, GrantEffect]:
    """Each grant's effect (by grant id) under the policy, with the policy engine's own resolution:
    the one ``tools/list`` uses (``engine.resolve``, cached) for an agent whose grants all reach it.
    A disabled grant or server gives nothing today; its tools are added to the agent's universe and
    evaluated by the same pipeline, to say what the policy would remove once it is enabled. One
    query for the servers' tools and one resolution per agent, whatever the number of tools."""
    grants = list(grants)
    if not grants:
        return {}
    tools: dict[object, list[str]] = {}
    for server_id, name in (
        MCPServerTool.objects.for_tenant(tenant)
        .filter(server_id__in={g.server_id for g in grants})
        .order_by("name", "id")
        .values_list("server_id", "name")
    ):
        tools.setdefault(server_id, []).append(name)
    by_agent: dict[object, list[AgentGrant]] = {}
    for grant in grants:
        by_agent.setdefault(grant.agent_id, []).append(grant)
    scope = engine.CallScope()
    effects: dict[uuid.UUID, GrantEffect] = {}
    for agent_grants in by_agent.values():
        agent = agent_grants[0].agent
        given: dict[uuid.UUID, tuple[str, ...]] = {}
        for grant in agent_grants:
            entry = Accessible(server=grant.server, agent_grant=grant, user_grant=None, tools=())
            names = (
                naming.registered_name(grant.server, t)
                for t in tools.get(grant.server_id, [])
                if entry.allows(t)
            )
            given[grant.pk] = tuple(sorted(n for n in names if n not in CATALOG))
        dormant = [g for g in agent_grants if not (g.enabled and g.server.enabled)]
        if dormant:
            universe = universe_for(tenant, agent)
            for grant in dormant:
                universe = _with_tools(universe, grant.server.name, given[grant.pk])
            documents = engine.load_documents(tenant, agent)
            allowed = set(engine.evaluate(universe, documents, scope))
        else:
            allowed = set(engine.resolve(tenant, agent, scope).tools)
        for grant in agent_grants:
            kept = tuple(n for n in given[grant.pk] if n in allowed)
            removed = tuple(n for n in given[grant.pk] if n not in allowed)
            effects[grant.pk] = GrantEffect(given=given[grant.pk], effective=kept, removed=removed)
    return effects


def credential_list(*, tenant: Tenant, server: MCPServer) -> TenantQuerySet[UserCredential]:
    return (
        UserCredential.objects.for_tenant(tenant)
        .filter(server_id=server.pk)
        .select_related("server")
        .order_by("user_id", "id")
    )


# --- access requests -------------------------------------------------------------------------------------


def visible_requests(actor: Actor) -> TenantQuerySet[AccessRequest]:
    """Administrators see every request of the tenant; anyone else only the requests they made."""
    queryset = AccessRequest.objects.for_tenant(actor.tenant).select_related("server", "agent")
    if actor.can(Role.ADMIN):
        return queryset
    return queryset.filter(requester_kind=actor.kind, requester_id=actor.id)


def request_list(
    *, actor: Actor, status: str = "", server: str = "", scope: str = ""
) -> TenantQuerySet[AccessRequest]:
    """The requests ``actor`` may see, newest first, optionally by status, server name and scope."""
    queryset = visible_requests(actor)
    if status:
        queryset = queryset.filter(status=status)
    if server:
        queryset = queryset.filter(server__name=server)
    if scope:
        queryset = queryset.filter(scope=scope)
    return queryset.order_by("-created_at", "-id")


def server_counts_by_status() -> dict[str, int]:
    """For the operator's metrics, across every tenant: MCP servers by health status (``disabled`` for
    those switched off). Counts only: nothing of a tenant's servers leaves this function."""
    rows = (
        MCPServer.objects.dangerously_all_tenants()
        .values("enabled", "status")
        .annotate(count=Count("pk"))
        .order_by()
    )
    counts = dict.fromkeys([*MCPServer.Status.values, "disabled"], 0)
    for row in rows:
        key = row["status"] if row["enabled"] else "disabled"
        counts[key] = counts.get(key, 0) + int(row["count"])
    return counts


def pending_request_count(actor: Actor) -> int:
    """How many access requests ``actor`` sees (administrators: the tenant's; anyone else: their own)
    wait for a review."""
    return int(visible_requests(actor).filter(status=AccessRequest.Status.PENDING).count())


def servers_not_connected_count(*, tenant: Tenant) -> int:
    """How many enabled MCP servers of ``tenant`` are not connected (in error, disconnected, or never
    reached)."""
    servers = MCPServer.objects.for_tenant(tenant).filter(enabled=True)
    return int(servers.exclude(status=MCPServer.Status.CONNECTED).count())
