"""Which MCP tools an agent (and the user it acts for) can reach (SPEC Part A "MCP", B §3.2 and §3.3).

Stricter than upstream: the agent grant is required and enabled and the server enabled; a user grant,
when one exists for a real user (not ``""`` or ``"system"``), must be enabled, and its
``tool_allow``/``tool_deny`` narrow the agent grant's further. Deny beats allow everywhere, the call-time
check (``apps.mcp_grants.bridge.target``) included. Filters match the original (unprefixed) tool name exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apps.mcp_grants import naming
from apps.mcp_grants.models import AgentGrant, MCPServer, MCPServerTool, UserGrant

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

SYNTHETIC_USERS = frozenset({"", "system"})


def is_tool_allowed(name: str, allow: Sequence[str] | None, deny: Sequence[str] | None) -> bool:
    """B §3.3 ``IsToolAllowed``: deny first; an empty or missing allow list allows; otherwise the name
    must be in it. Exact, case-sensitive, on the original tool name."""
    if deny and name in deny:
        return False
    if not allow:
        return True
    return name in allow


@dataclass(frozen=True)
class Accessible:
    server: MCPServer
    agent_grant: AgentGrant
    user_grant: UserGrant | None
    tools: tuple[str, ...]  # original names, sorted

    @property
    def registered(self) -> tuple[str, ...]:
        return tuple(naming.registered_name(self.server, tool) for tool in self.tools)

    def allows(self, tool: str) -> bool:
        allow, deny = self.agent_grant.filters()
        if not is_tool_allowed(tool, allow, deny):
            return False
        if self.user_grant is not None:
            allow, deny = self.user_grant.filters()
            return is_tool_allowed(tool, allow, deny)
        return True


def accessible(tenant: Tenant, agent: Agent, user_id: str = "") -> list[Accessible]:
    """The servers ``agent`` (acting for ``user_id``) can use, each with the tools it may call."""
    grants = list(
        AgentGrant.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, enabled=True, server__enabled=True, server__tenant_id=tenant.pk)
        .select_related("server")
    )
    if not grants:
        return []
    server_ids = [g.server_id for g in grants]
    user_grants: dict[object, UserGrant] = {}
    if user_id not in SYNTHETIC_USERS:
        user_grants = {
            g.server_id: g
            for g in UserGrant.objects.for_tenant(tenant).filter(server_id__in=server_ids, user_id=user_id)
        }
    tools: dict[object, list[str]] = {}
    for server_id, name in (
        MCPServerTool.objects.for_tenant(tenant)
        .filter(server_id__in=server_ids)
        .order_by("name")
        .values_list("server_id", "name")
    ):
        tools.setdefault(server_id, []).append(name)
    result = []
    for grant in sorted(grants, key=lambda g: g.server.name):
        user_grant = user_grants.get(grant.server_id)
        if user_grant is not None and not user_grant.enabled:
            continue  # a disabled user grant vetoes the server
        entry = Accessible(server=grant.server, agent_grant=grant, user_grant=user_grant, tools=())
        allowed = tuple(t for t in tools.get(grant.server_id, []) if entry.allows(t))
        result.append(
            Accessible(server=grant.server, agent_grant=grant, user_grant=user_grant, tools=allowed)
        )
    return result
