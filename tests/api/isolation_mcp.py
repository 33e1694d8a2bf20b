"""Tenant-isolation cases for the routes of MCP servers, grants and access requests (merged into
``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_mcp(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """A server of ``tenant`` with a discovered tool, an agent and a user grant, a user's credentials
    and a pending access request; returns their names and ids."""
    system = Actor.system(tenant)
    server = services.server_create(
        actor=system,
        name=f"{prefix}-server",
        transport="streamable-http",
        url="https://93.184.216.34/mcp",
        headers={"Authorization": "Bearer a-secret-header"},
    )
    MCPServerTool.objects.create(tenant=tenant, server=server, name=f"{prefix}_tool")
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-agent", name="Agent")
    other = tenant_services.agent_create(actor=system, key=f"{prefix}-other", name="Other agent")
    services.agent_grant_set(actor=system, server=server, agent=agent, tool_allow=[f"{prefix}_tool"])
    user_id = f"{prefix}-user@a.test"
    services.user_grant_set(actor=system, server=server, user_id=user_id)
    services.credential_set(actor=system, server=server, user_id=user_id, api_key="a-secret-user-key")
    req = services.request_create(actor=system, server=server, scope="agent", agent=other, reason="please")
    return {
        "server": server.name,
        "agent": agent.key,
        "other_agent": other.key,
        "user": user_id,
        "request": str(req.pk),
    }


def _kwargs(**names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the objects and returns URL kwargs: ``kwarg=name in make_mcp``."""

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_mcp(tenant)
        return {kwarg: made[name] for kwarg, name in names.items()}

    return make


GRANT = {"tool_allow": None, "enabled": True}

CASES: dict[str, Case] = {
    "mcp-server-list": Case(make=_kwargs(name="server"), collection=True),
    "mcp-server-detail": Case(
        make=_kwargs(name="server"),
        writes=[("patch", {"enabled": False, "timeout_sec": 5}), ("delete", None)],
    ),
    "mcp-server-tools": Case(make=_kwargs(name="server")),
    "mcp-server-test": Case(make=_kwargs(name="server"), writes=[("post", None)]),
    "mcp-server-refresh": Case(make=_kwargs(name="server"), writes=[("post", None)]),
    "mcp-grant-list": Case(make=_kwargs(name="server")),
    "mcp-agent-grant": Case(
        make=_kwargs(name="server", key="agent"), writes=[("put", GRANT), ("delete", None)]
    ),
    "mcp-user-grant": Case(
        make=_kwargs(name="server", user_id="user"), writes=[("put", {"enabled": False}), ("delete", None)]
    ),
    "mcp-credential-list": Case(make=_kwargs(name="server")),
    "mcp-credential-detail": Case(
        make=_kwargs(name="server", user_id="user"),
        writes=[("put", {"api_key": "b-was-here"}), ("delete", None)],
    ),
    "agent-mcp-grants": Case(make=_kwargs(key="agent")),
    "mcp-request-list": Case(make=_kwargs(request="request"), collection=True),
    "mcp-request-detail": Case(make=_kwargs(pk="request")),
    "mcp-request-approve": Case(
        make=_kwargs(pk="request"), writes=[("post", {}), ("post", {"tool_allow": ["secret_tool"]})]
    ),
    "mcp-request-reject": Case(make=_kwargs(pk="request"), writes=[("post", {"note": "B says no"})]),
}
