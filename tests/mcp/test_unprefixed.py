"""MCP servers registered without a tool-name prefix (``prefix_tools: false``), through the public
surface against real MCP servers (stdio, made with the SDK): their tools listed, granted, matched by the
policy and called under their own names; a name that would collide (a built-in tool's, a custom tool's,
another server's tool's of the same tenant) refused at registration and left out at discovery, with the
reason on the server; the personas on the new field."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import ToolCall
from apps.mcp_grants import client, services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets
from tests.custom_tools.support import DNS_LOOKUP
from tests.mcp.live_servers import stdio_fields

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

SERVERS = "/api/v1/mcp/servers/"
CLASHING = Path(__file__).resolve().parent / "servers" / "clashing.py"


def clashing_fields() -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(CLASHING)]}


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def register(api, tenant, name, fields, agent="bot", **extra):  # type: ignore[no-untyped-def]
    """Register ``name`` through the API, grant it to ``agent`` and discover its tools."""
    body = ok(api.post(SERVERS, {"name": name, **fields, **extra}, format="json"), 201)
    server = MCPServer.objects.for_tenant(tenant).get(name=name)
    system = Actor.system(tenant)
    found = tenant_services.agent_create(actor=system, key=agent, name=agent.title()) if agent else None
    if found is not None:
        services.agent_grant_set(actor=system, server=server, agent=found)
    client.refresh(server)
    return body, MCPServer.objects.for_tenant(tenant).get(pk=server.pk)


def listed(api, agent="bot"):  # type: ignore[no-untyped-def]
    body = ok(api.get(f"/api/v1/agents/{agent}/tools", {"format": "mcp"}))
    return {t["name"]: t for t in body["tools"]}


def call(api, tool, args=None, agent="bot"):  # type: ignore[no-untyped-def]
    body = {"agent": agent, "tool": tool, "args": args or {}}
    return ok(api.post("/api/v1/runtime/execute", body, format="json"))


def test_an_unprefixed_servers_tools_are_listed_and_called_under_their_own_names(tenant_a, admin_a, member_a):
    created, server = register(admin_a, tenant_a, "demo", stdio_fields(), prefix_tools=False)
    assert created["prefix_tools"] is False
    assert created["registered_prefix"] == ""
    assert created["tool_conflicts"] == []

    tools = listed(member_a)
    assert "echo" in tools
    assert "counter" in tools
    assert not [name for name in tools if name.startswith("mcp_demo__")]
    assert tools["echo"]["description"] == "Echo the text back."
    assert tools["echo"]["inputSchema"]["required"] == ["text"]

    body = call(member_a, "echo", {"text": "under its own name"})
    assert body == {**body, "for_llm": "under its own name", "is_error": False}
    record = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert (record.resolved_tool, record.decision, record.status) == ("echo", "allowed", "ok")
    # the prefixed form names nothing
    assert call(member_a, "mcp_demo__echo", {"text": "x"})["is_error"]

    shown = ok(admin_a.get(f"{SERVERS}demo/tools/"))
    rows = shown["results"] if isinstance(shown, dict) else shown
    assert {r["name"]: r["registered_name"] for r in rows}["echo"] == "echo"
    # the grant scopes it like any MCP tool: left out of the grant, it is neither listed nor callable
    services.agent_grant_set(
        actor=Actor.system(tenant_a),
        server=server,
        agent=Agent.objects.for_tenant(tenant_a).get(key="bot"),
        tool_deny=["echo"],
    )
    assert "echo" not in listed(member_a)
    refused = call(member_a, "echo", {"text": "x"})
    assert refused["is_error"]


def test_policy_names_an_unprefixed_tool_by_its_own_name_and_the_servers_group(tenant_a, admin_a, member_a):
    register(admin_a, tenant_a, "demo", stdio_fields(), prefix_tools=False)
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["echo"]}}, format="json"))
    tools = listed(member_a)
    assert "echo" not in tools
    assert "counter" in tools
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["group:mcp:demo"]}}, format="json"))
    tools = listed(member_a)
    assert "echo" not in tools
    assert "counter" not in tools
    # a prefixed pattern selects no unprefixed tool: saved with a warning, nothing denied
    ok(admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["mcp_demo__*"]}}, format="json"))
    assert {"echo", "counter"} <= set(listed(member_a))


def test_tools_discovered_later_that_collide_are_left_out_with_the_reason(tenant_a, admin_a, member_a):
    ok(admin_a.post("/api/v1/custom-tools/", DNS_LOOKUP, format="json"), 201)
    register(admin_a, tenant_a, "demo", stdio_fields(), prefix_tools=False)
    _, clash = register(admin_a, tenant_a, "clash", clashing_fields(), agent="", prefix_tools=False)
    services.agent_grant_set(
        actor=Actor.system(tenant_a), server=clash, agent=Agent.objects.for_tenant(tenant_a).get(key="bot")
    )

    stored = set(
        MCPServerTool.objects.for_tenant(tenant_a).filter(server=clash).values_list("name", flat=True)
    )
    assert stored == {"shout"}
    shown = ok(admin_a.get(f"{SERVERS}clash/"))
    reasons = {c["tool"]: c["reason"] for c in shown["tool_conflicts"]}
    assert set(reasons) == {"datetime", "dns_lookup", "echo"}
    assert reasons["datetime"] == (
        "the tool 'datetime' of the MCP server 'clash' would be registered as 'datetime', the name of the "
        "built-in tool of that name."
    )
    assert reasons["dns_lookup"].endswith("the name of the custom tool 'dns_lookup'.")
    assert reasons["echo"].endswith("the name of a tool of the MCP server 'demo'.")
    assert shown["status"] == "connected"
    assert len(shown["last_health"]["tool_conflicts"]) == 3

    # the others work; each colliding name keeps meaning the tool it had
    assert call(member_a, "shout", {"text": "quiet"})["for_llm"] == "QUIET"
    assert call(member_a, "echo", {"text": "from demo"})["for_llm"] == "from demo"
    assert call(member_a, "datetime")["for_llm"] != "clashing datetime"
    assert call(member_a, "dns_lookup", {"domain": "localhost"})["for_llm"] != "clashing lookup of localhost"


def test_an_unprefixed_tool_may_have_another_servers_prefixed_tools_name_only_once(tenant_a, admin_a):
    register(admin_a, tenant_a, "clash", clashing_fields(), agent="")
    # the prefixed server registered its tools as mcp_clash__<tool>: no unprefixed tool collides with them
    _, demo = register(admin_a, tenant_a, "demo", stdio_fields(), agent="", prefix_tools=False)
    assert demo.tool_conflicts == []
    assert MCPServerTool.objects.for_tenant(tenant_a).filter(server=demo, name="echo").exists()


def test_switching_the_prefix_off_is_refused_when_a_discovered_tool_collides(tenant_a, admin_a):
    register(admin_a, tenant_a, "demo", stdio_fields(), agent="", prefix_tools=False)
    register(admin_a, tenant_a, "clash", clashing_fields(), agent="")
    before = tenant_state(tenant_a)
    refused = error(
        admin_a.patch(f"{SERVERS}clash/", {"prefix_tools": False}, format="json"), 409, "conflict"
    )
    assert "'datetime' of the MCP server 'clash' would be registered as 'datetime'" in refused["message"]
    assert "the built-in tool of that name" in refused["message"]
    assert "'echo'" in refused["message"]
    assert "a tool of the MCP server 'demo'" in refused["message"]
    assert tenant_state(tenant_a) == before
    assert MCPServer.objects.for_tenant(tenant_a).get(name="clash").prefix_tools is True


def test_a_custom_tool_cannot_take_an_unprefixed_mcp_tools_name(tenant_a, admin_a):
    register(admin_a, tenant_a, "demo", stdio_fields(), agent="", prefix_tools=False)
    before = tenant_state(tenant_a)
    refused = error(
        admin_a.post("/api/v1/custom-tools/", {**DNS_LOOKUP, "name": "echo"}, format="json"),
        409,
        "name_reserved",
    )
    assert "'echo' is the name of a tool of the MCP server 'demo'" in refused["message"]
    assert tenant_state(tenant_a) == before


def test_another_tenants_tools_and_custom_tools_never_collide(tenant_a, tenant_b, admin_a, member_a):
    b_system = Actor.system(tenant_b)
    other = services.server_create(actor=b_system, name="demo", prefix_tools=False, **stdio_fields())
    client.refresh(other)
    assert MCPServerTool.objects.for_tenant(tenant_b).filter(server=other, name="echo").exists()
    _, demo = register(admin_a, tenant_a, "demo", stdio_fields(), prefix_tools=False)
    assert demo.tool_conflicts == []
    assert call(member_a, "echo", {"text": "mine"})["for_llm"] == "mine"


def test_prefix_tools_must_be_a_boolean(tenant_a, admin_a):
    before = tenant_state(tenant_a)
    body = {"name": "demo", "prefix_tools": "no", **stdio_fields()}
    refused = error(admin_a.post(SERVERS, body, format="json"), 400, "invalid")
    assert "prefix_tools" in refused["details"]
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("method", "url", "body", "success"),
    [
        ("patch", "{server}", {"prefix_tools": False}, 200),
        ("post", "", {"name": "plain", "transport": "stdio", "command": "npx", "prefix_tools": False}, 201),
    ],
)
def test_personas_on_prefix_tools(method, url, body, success, request, tenant_a):
    ids = _targets(tenant_a)
    target = f"{SERVERS}{url.format(server=ids['mcp_server'])}" + ("/" if url else "")
    check_personas(
        request,
        tenant_a,
        method=method,
        url=target,
        body=body,
        least="admin",
        success=success,
        outsider_status=404 if url else 201,
        never_shown_to_outsider=(ids["mcp_server"],),
    )
