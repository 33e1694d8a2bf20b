"""Toolgate's MCP endpoint as MCP clients see it: the SDK's own client against a real daphne.

The tool list equals the REST listing (``GET /api/v1/agents/<key>/tools?format=mcp``) for every policy
configuration tried, each changed through the REST API; calls run through the runtime pipeline (recorded
like REST calls), tools outside the list are refused without running, and an exec call that needs a
human waits until an admin decides through the REST API.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from apps.audit.models import ToolCall
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServerTool
from apps.messaging import services as messaging_services
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey, Tenant
from apps.tenants.roles import Role
from apps.toolkit.workspace import workspace_for
from tests import factories
from tests.mcp.endpoint_client import call_tool, endpoint, list_tools, rest, rest_tools, session, text, wire

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def member(tenant_a: Tenant, agent: Agent) -> str:
    return factories.make_api_key(tenant_a, Role.MEMBER)


@pytest.fixture
def admin(tenant_a: Tenant, agent: Agent) -> str:
    return factories.make_api_key(tenant_a, Role.ADMIN)


def put_policy(base: str, admin: str, path: str, document: dict[str, Any]) -> None:
    with rest(base, admin) as client:
        response = client.put(f"/api/v1/policy/{path}", json={"document": document})
    assert response.status_code == 200, response.text


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["name"] for tool in tools]


def assert_same_list(base: str, key: str, query: str = "") -> list[dict[str, Any]]:
    """The MCP list for ``query`` equals the REST list: names, descriptions and schemas, in order."""
    over_mcp = list_tools(endpoint(base, query=query), key)
    over_rest = rest_tools(base, key, query=query)
    assert names(over_mcp) == names(over_rest)
    assert over_mcp == over_rest
    return over_mcp


def test_the_list_equals_the_rest_list_for_every_policy_configuration(base, tenant_a, agent, member, admin):
    defaults = names(assert_same_list(base, member))
    assert {"datetime", "read_file", "exec"} <= set(defaults)

    put_policy(base, admin, "tenant/", {"profile": "messaging"})
    messaging = names(assert_same_list(base, member))
    assert "exec" not in messaging
    assert "web_fetch" in messaging

    put_policy(base, admin, "tenant/", {"profile": "coding"})
    put_policy(base, admin, "agents/bot/", {"deny": ["exec", "group:web"]})
    coding = names(assert_same_list(base, member))
    assert "read_file" in coding
    assert not {"exec", "web_fetch", "web_search"} & set(coding)

    put_policy(base, admin, "channels/telegram/", {"allow": ["read_file", "list_files", "datetime"]})
    in_channel = names(assert_same_list(base, member, "channel=telegram"))
    assert in_channel == ["list_files", "read_file"]  # the profile has no datetime: allow lists intersect
    assert names(assert_same_list(base, member, "channel=web")) == coding

    narrowed = names(assert_same_list(base, member, "tool_allow=read_file,list_files,exec"))
    assert narrowed == ["list_files", "read_file"]  # exec stays denied: tool_allow only narrows

    strap = names(assert_same_list(base, member, "style=strap"))
    assert "file" in strap
    assert "read_file" not in strap

    assert names(assert_same_list(base, member, "subagent_depth=2&provider=openai")) != []


def test_the_list_follows_mcp_grants_per_user(base, tenant_a, agent, member):
    system = Actor.system(tenant_a)
    server = mcp_services.server_create(actor=system, name="pg", transport="stdio", command="npx")
    schema = {
        "type": "object",
        "properties": {"sql": {"type": "string", "description": "SQL"}},
        "required": ["sql"],
    }
    for tool in ("query", "drop"):
        MCPServerTool.objects.create(
            tenant=tenant_a, server=server, name=tool, description=f"{tool} the database", input_schema=schema
        )
    mcp_services.agent_grant_set(actor=system, server=server, agent=agent, tool_deny=["drop"])
    mcp_services.user_grant_set(actor=system, server=server, user_id="u1", enabled=False)

    for_u2 = assert_same_list(base, member, "user_id=u2")
    granted = [tool for tool in for_u2 if tool["name"].startswith("mcp_")]
    assert granted == [{"name": "mcp_pg__query", "description": "query the database", "inputSchema": schema}]
    for_u1 = assert_same_list(base, member, "user_id=u1")
    assert not [name for name in names(for_u1) if name.startswith("mcp_")]  # the disabled user grant vetoes


def test_search_mode_lists_the_same_over_mcp_and_rest_before_and_after_a_search(
    base, tenant_a, agent, member
):
    system = Actor.system(tenant_a)
    server = mcp_services.server_create(actor=system, name="big", transport="stdio", command="npx")
    for n in range(45):
        description = "Convert money between currencies." if n == 7 else f"Look up record {n}."
        MCPServerTool.objects.create(
            tenant=tenant_a, server=server, name=f"tool_{n:02d}", description=description
        )
    mcp_services.agent_grant_set(actor=system, server=server, agent=agent)

    before = assert_same_list(base, member, "session_key=s1")
    assert "mcp_tool_search" in names(before)
    assert not [name for name in names(before) if name.startswith("mcp_big__")]
    url = endpoint(base, query="session_key=s1")
    found = call_tool(url, member, "mcp_tool_search", {"query": "currency"})
    assert not found.is_error, text(found)
    assert "mcp_big__tool_07" in text(found)
    after = assert_same_list(base, member, "session_key=s1")
    assert [name for name in names(after) if name.startswith("mcp_big__")] == ["mcp_big__tool_07"]
    assert "mcp_big__tool_07" not in names(assert_same_list(base, member, "session_key=s2"))


def test_a_call_runs_through_the_pipeline_and_is_recorded_like_a_rest_call(base, tenant_a, agent, member):
    url = endpoint(base, query="session_key=s1&user_id=u1&channel=web&chat_id=c1")
    result = call_tool(url, member, "datetime", {"timezone": "Europe/Paris"})
    assert not result.is_error
    assert "Europe/Paris" in text(result) or "+01:00" in text(result) or "+02:00" in text(result)

    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert result.meta == {"toolgate/call_id": call.id.hex}
    assert (call.tool, call.decision, call.status) == ("datetime", "allowed", "ok")
    assert (call.session_key, call.user_id, call.channel, call.chat_id) == ("s1", "u1", "web", "c1")
    key = ApiKey.objects.for_tenant(tenant_a).get(role=Role.MEMBER)
    assert (call.origin, call.actor_kind, call.actor_id) == ("user", "api_key", str(key.pk))
    assert call.request_id


def test_files_written_over_mcp_are_read_back_from_the_agents_workspace(base, tenant_a, agent, member):
    url = endpoint(base, agent="bot", slash=False)  # without the trailing slash too
    written = call_tool(
        url, member, "write_file", {"path": "notes/plan.txt", "content": "step one\nstep two\n"}
    )
    assert not written.is_error, text(written)
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    assert (workspace / "notes" / "plan.txt").read_text() == "step one\nstep two\n"

    read = call_tool(url, member, "read_file", {"path": "notes/plan.txt"})
    assert not read.is_error
    assert "step two" in text(read)


def test_tools_outside_the_list_are_refused_and_never_run(base, tenant_a, agent, member, admin):
    put_policy(base, admin, "agents/bot/", {"deny": ["write_file"]})
    url = endpoint(base)
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")

    denied = call_tool(url, member, "write_file", {"path": "denied.txt", "content": "x"})
    assert denied.is_error
    assert text(denied) == "tool not allowed by policy: write_file"
    assert not (workspace / "denied.txt").exists()

    narrowed = call_tool(
        endpoint(base, query="tool_allow=datetime"), member, "exec", {"command": "touch ran.txt"}
    )
    assert narrowed.is_error
    assert text(narrowed) == "tool not allowed by policy: exec"
    assert not (workspace / "ran.txt").exists()

    unknown = call_tool(url, member, "delete_everything", {})
    assert unknown.is_error
    assert text(unknown).startswith("unknown tool: delete_everything.")
    assert "Available tools:" in text(unknown)

    invalid = call_tool(url, member, "datetime", {"timezone": 7})
    assert invalid.is_error
    assert text(invalid).startswith("Invalid arguments for datetime")

    decisions = ToolCall.objects.for_tenant(tenant_a).order_by("created_at").values_list("tool", "decision")
    assert list(decisions) == [
        ("write_file", "denied"),
        ("exec", "denied"),
        ("delete_everything", "unknown"),
        ("datetime", "invalid"),
    ]


def test_a_channel_topics_allow_list_holds_over_mcp_as_over_rest(base, tenant_a, agent, member):
    topic = "-100123:topic:45"
    messaging_services.channel_create(
        actor=Actor.system(tenant_a),
        name="tg",
        kind="telegram",
        secret="123456:" + "a" * 30,
        topics={topic: ["datetime", "group:memory"]},
    )
    query = f"channel=tg&chat_id={topic.replace(':', '%3A')}"
    narrowed = assert_same_list(base, member, query)
    assert "datetime" in names(narrowed)
    assert "write_file" not in names(narrowed)
    assert "write_file" in names(assert_same_list(base, member))

    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    refused = call_tool(endpoint(base, query=query), member, "write_file", {"path": "t.txt", "content": "x"})
    assert refused.is_error
    assert text(refused) == "tool not allowed by policy: write_file"
    assert not (workspace / "t.txt").exists()
    allowed = call_tool(endpoint(base, query=query), member, "datetime", {"timezone": "UTC"})
    assert not allowed.is_error, text(allowed)


def test_a_client_on_the_stateless_2026_protocol_gets_the_same_tools_and_calls(base, tenant_a, agent, member):
    async def go() -> tuple[list[dict[str, Any]], str, str]:
        async with session(endpoint(base, query="session_key=s9"), member, modern=True) as client:
            assert client.protocol_version == "2026-07-28"
            listing = await client.list_tools()
            # What an agent may use changes with its policy at any moment: not to be cached, not shared.
            assert (listing.ttl_ms, listing.cache_scope) == (0, "private")
            listed = [wire(tool) for tool in listing.tools]
            result = await client.call_tool("datetime", {"timezone": "UTC"})
            assert not result.is_error
            return listed, text(result), str((result.meta or {}).get("toolgate/call_id"))

    listed, output, call_id = asyncio.run(go())
    assert listed == rest_tools(base, member)
    assert "UTC" in output
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.id.hex, call.session_key, call.decision) == (call_id, "s9", "allowed")


def _pending(tenant: Tenant, timeout: float = 30) -> PendingApproval:
    deadline = time.monotonic() + timeout
    while True:
        row = PendingApproval.objects.for_tenant(tenant).filter(status="pending").first()
        if row is not None:
            return row
        assert time.monotonic() < deadline, "no approval was requested"
        time.sleep(0.05)


def test_an_exec_call_waits_for_an_approval_and_runs_once_an_admin_allows_it(
    base, tenant_a, agent, member, admin
):
    put_policy(base, admin, "tenant/", {"execApproval": {"ask": "on-miss"}})
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    command = "touch approved.txt && echo approved-run"
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(call_tool, endpoint(base), member, "exec", {"command": command})
        approval = _pending(tenant_a)
        assert approval.command == command
        time.sleep(0.5)
        assert not waiting.done()  # the MCP call is held open while a human decides
        assert not (workspace / "approved.txt").exists()

        with rest(base, admin) as client:
            decided = client.post(f"/api/v1/approvals/{approval.pk}/decide", json={"decision": "allow-once"})
        assert decided.status_code == 200, decided.text
        result = waiting.result(timeout=60)

    assert not result.is_error, text(result)
    assert "approved-run" in text(result)
    assert (workspace / "approved.txt").exists()
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.tool, call.decision, call.id.hex) == ("exec", "allowed", approval.call_id)


def test_an_exec_call_an_admin_denies_is_an_error_result_and_never_runs(base, tenant_a, agent, member, admin):
    put_policy(base, admin, "tenant/", {"execApproval": {"ask": "on-miss"}})
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(call_tool, endpoint(base), member, "exec", {"command": "touch refused.txt"})
        approval = _pending(tenant_a)
        with rest(base, admin) as client:
            decided = client.post(
                f"/api/v1/approvals/{approval.pk}/decide", json={"decision": "deny", "reason": "not today"}
            )
        assert decided.status_code == 200, decided.text
        result = waiting.result(timeout=60)

    assert result.is_error
    assert text(result).startswith("exec approval denied by an administrator: not today.")
    assert not (workspace / "refused.txt").exists()
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "approval_denied"
