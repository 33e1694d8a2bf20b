"""What an agent (and user) can reach: SPEC Part A "MCP" semantics, through reachability.accessible, the
call-time authorize, and the policy universe."""

from __future__ import annotations

import pytest

from apps.accounts import services as tenant_services
from apps.mcp_grants import bridge, reachability, services
from apps.mcp_grants.reachability import is_tool_allowed
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.toolkit.providers import ToolRefused
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def system(tenant_a):
    return Actor.system(tenant_a)


@pytest.fixture
def agent(system):
    return tenant_services.agent_create(actor=system, key="bot", name="Bot")


@pytest.fixture
def pg(tenant_a):
    return make_server(tenant_a, "pg", ["query", "schema", "drop"])


def reach(tenant, agent, user_id=""):
    return {e.server.name: list(e.registered) for e in reachability.accessible(tenant, agent, user_id)}


def test_is_tool_allowed_table():
    assert is_tool_allowed("a", None, None)
    assert is_tool_allowed("a", [], [])
    assert is_tool_allowed("a", ["a"], [])
    assert not is_tool_allowed("b", ["a"], [])
    assert not is_tool_allowed("a", ["a"], ["a"])  # deny beats allow
    assert not is_tool_allowed("a", None, ["a"])
    assert not is_tool_allowed("A", ["a"], None)  # exact, case-sensitive


def test_agent_grant_required(tenant_a, agent, pg):
    assert reach(tenant_a, agent) == {}
    services.agent_grant_set(actor=Actor.system(tenant_a), server=pg, agent=agent)
    assert reach(tenant_a, agent) == {"pg": ["mcp_pg__drop", "mcp_pg__query", "mcp_pg__schema"]}


def test_disabled_agent_grant_and_disabled_server(system, tenant_a, agent, pg):
    services.agent_grant_set(actor=system, server=pg, agent=agent, enabled=False)
    assert reach(tenant_a, agent) == {}
    services.agent_grant_set(actor=system, server=pg, agent=agent, enabled=True)
    services.server_update(actor=system, server=pg, enabled=False)
    assert reach(tenant_a, agent) == {}
    services.server_update(actor=system, server=pg, enabled=True)
    assert "pg" in reach(tenant_a, agent)


def test_agent_allow_and_deny(system, tenant_a, agent, pg):
    services.agent_grant_set(
        actor=system, server=pg, agent=agent, tool_allow=["query", "drop"], tool_deny=["drop"]
    )
    assert reach(tenant_a, agent) == {"pg": ["mcp_pg__query"]}


def test_user_allow_cannot_lift_an_agent_deny(system, tenant_a, agent, pg):
    services.agent_grant_set(actor=system, server=pg, agent=agent, tool_deny=["drop"])
    services.user_grant_set(actor=system, server=pg, user_id="u1", tool_allow=["drop", "query"])
    assert reach(tenant_a, agent, "u1") == {"pg": ["mcp_pg__query"]}
    tenant_a.refresh_from_db()
    with pytest.raises(ToolRefused):
        bridge.target(tenant_a, agent, "u1", "mcp_pg__drop")


def test_user_grant_vetoes_when_disabled_and_narrows(system, tenant_a, agent, pg):
    services.agent_grant_set(actor=system, server=pg, agent=agent, tool_allow=["query", "schema"])
    assert reach(tenant_a, agent, "u1") == {"pg": ["mcp_pg__query", "mcp_pg__schema"]}  # no user grant
    grant = services.user_grant_set(actor=system, server=pg, user_id="u1", enabled=False)
    assert reach(tenant_a, agent, "u1") == {}
    assert "pg" in reach(tenant_a, agent, "u2")
    services.user_grant_set(actor=system, server=pg, user_id="u1", tool_allow=["query", "drop"])
    # the user grant narrows; it never adds "drop", which the agent grant does not allow
    assert reach(tenant_a, agent, "u1") == {"pg": ["mcp_pg__query"]}
    services.user_grant_set(actor=system, server=pg, user_id="u1", tool_allow=None, tool_deny=["query"])
    assert reach(tenant_a, agent, "u1") == {"pg": ["mcp_pg__schema"]}
    services.user_grant_set(actor=system, server=pg, user_id="u1", tool_allow=["query"], tool_deny=["query"])
    assert reach(tenant_a, agent, "u1") == {"pg": []}
    services.grant_delete(actor=system, grant=grant)
    assert reach(tenant_a, agent, "u1") == {"pg": ["mcp_pg__query", "mcp_pg__schema"]}


@pytest.mark.parametrize("user_id", ["", "system"])
def test_synthetic_users_ignore_user_grants(system, tenant_a, agent, pg, user_id):
    services.agent_grant_set(actor=system, server=pg, agent=agent)
    services.user_grant_set(actor=system, server=pg, user_id="u1", enabled=False)
    from apps.mcp_grants.models import UserGrant

    # a stale disabled row for the synthetic id itself (written directly: the service refuses it)
    UserGrant.objects.create(tenant=tenant_a, server=pg, user_id="system", enabled=False, granted_by="x")
    assert reach(tenant_a, agent, user_id)["pg"] == ["mcp_pg__drop", "mcp_pg__query", "mcp_pg__schema"]


def test_the_call_time_check_applies_deny(system, tenant_a, agent, pg):
    services.agent_grant_set(actor=system, server=pg, agent=agent, tool_deny=["drop"])
    tenant_a.refresh_from_db()
    found = bridge.target(tenant_a, agent, "", "mcp_pg__query")
    assert (found.server.pk, found.tool) == (pg.pk, "query")
    with pytest.raises(ToolRefused) as denied:
        bridge.target(tenant_a, agent, "", "mcp_pg__drop")
    assert denied.value.reason == "tool_not_in_allow_list"
    with pytest.raises(ToolRefused) as unknown:
        bridge.target(tenant_a, agent, "", "mcp_other__query")
    assert unknown.value.reason == "server_not_accessible"

    # a change of the grants raises the configuration version: the next check sees it at once
    services.agent_grant_set(actor=system, server=pg, agent=agent, tool_deny=["drop", "query"])
    tenant_a.refresh_from_db()
    with pytest.raises(ToolRefused):
        bridge.target(tenant_a, agent, "", "mcp_pg__query")


def test_tenant_isolation(system, tenant_a, tenant_b, agent, pg):
    services.agent_grant_set(actor=system, server=pg, agent=agent)
    b_system = Actor.system(tenant_b)
    b_agent = tenant_services.agent_create(actor=b_system, key="bot", name="Bot")
    b_pg = make_server(tenant_b, "pg", ["other"])
    assert reach(tenant_b, b_agent) == {}
    # tenant B cannot grant A's server, nor A's agent
    with pytest.raises(ServiceError):
        services.agent_grant_set(actor=b_system, server=pg, agent=b_agent)
    with pytest.raises(ServiceError):
        services.agent_grant_set(actor=b_system, server=b_pg, agent=agent)
    assert reach(tenant_a, agent) == {"pg": ["mcp_pg__drop", "mcp_pg__query", "mcp_pg__schema"]}
    # A's agent looked up in B's tenant reaches nothing
    assert reachability.accessible(tenant_b, agent, "") == []
