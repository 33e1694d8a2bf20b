"""Listing equals calling, on every transport, for generated policies and call scopes.

Hypothesis generates a tenant policy (with ``byProvider`` and ``originDeny``), an agent policy, a channel
topic's allow list and a call's scope (its channel and chat, its provider, its own ``tool_allow``, its
subagent depth), over built-in tools, a custom tool and the tools of an MCP server. For each, through the
public surfaces only:

* the tools ``GET /api/v1/agents/<key>/tools`` lists equal the tools Toolgate's MCP endpoint lists
  (the SDK's client against a real daphne);
* every probed tool is callable (the pipeline let it past policy) over REST and over the MCP endpoint
  exactly when it is listed, or, in MCP search mode, when ``mcp_tool_search`` finds it;
* ``mcp_tool_search`` finds a tool only when it is callable;
* the built-in runner (a run whose scripted model calls every probed tool) offers the model the same
  tools as REST lists for the runner's scope (its user and provider, no channel) and its calls get the
  same decisions.

The probes' arguments are of the wrong type, so an allowed tool stops at argument validation and none
runs: what is compared is the pipeline's decision, recorded on each ``ToolCall``."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from apps.audit.models import ToolCall
from apps.custom_tools import services as custom_services
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants import services as mcp_services
from apps.messaging import services as messaging_services
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.llm.fake_provider import chat_answer, scripted
from tests.llm.fake_provider import tool_call as model_call
from tests.mcp.endpoint_client import endpoint, session

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MANY = Path(__file__).parent.parent / "mcp" / "servers" / "many.py"
CHAT = "-100123:topic:7"
# Probed tools and arguments of the wrong type (an allowed tool stops at argument validation).
PROBES: dict[str, dict[str, Any]] = {
    "datetime": {"timezone": 7},
    "read_file": {"path": 7},
    "write_file": {"path": 7, "content": 7},
    "list_files": {"path": 7},
    "exec": {"command": 7},
    "web_fetch": {"url": 7},
    "memory_search": {"query": 7},
    "spawn": {"task": 7},
    "cron": {"action": 7},
    "mcp_many__convert_currency": {"text": 7},
    "mcp_many__create_issue": {"text": 7},
    "probe_tool": {"text": 7},  # a custom tool
}
# What finds each MCP probe in search mode.
SEARCHES = {
    "mcp_many__convert_currency": "convert money between currencies",
    "mcp_many__create_issue": "open a new issue in the bug tracker",
}
NOT_CALLABLE = {ToolCall.Decision.DENIED, ToolCall.Decision.UNKNOWN, ToolCall.Decision.ORIGIN_DENIED}
PATTERNS = (
    "group:fs", "group:web", "group:memory", "group:runtime", "group:sessions", "exec", "datetime",
    "read_file", "spawn", "cron", "mcp_many__*", "mcp_many__create_*", "mcp_tool_search", "probe_tool",
)  # fmt: skip
lists = st.lists(st.sampled_from(PATTERNS), max_size=4, unique=True)
tenant_documents = st.fixed_dictionaries(
    {},
    optional={
        "profile": st.sampled_from(["full", "coding", "messaging", "minimal"]),
        "allow": lists,
        "deny": lists,
        "alsoAllow": lists,
        # The runner's provider and the calls' ("main"): its tools narrowed, as for a call.
        "byProvider": st.fixed_dictionaries({"main": st.fixed_dictionaries({"allow": lists.filter(bool)})}),
        # A member key's calls have origin "user": what it may not call it is not offered either.
        "originDeny": st.fixed_dictionaries({"user": lists.filter(bool)}),
    },
)
agent_documents = st.fixed_dictionaries({}, optional={"allow": lists, "deny": lists})
scopes = st.fixed_dictionaries(
    {
        "topic": lists.filter(bool),  # the channel's topic always has a list; in_chat says if it applies
        "in_chat": st.booleans(),
        "tool_allow": st.none() | lists,
        "subagent_depth": st.sampled_from([0, 1]),
        "provider": st.sampled_from(["", "main"]),
    }
)


@pytest.fixture
def world(tenant_a, agent, provider, fake, live):  # type: ignore[no-untyped-def]
    """Tenant A with the agent ``bot`` (built-in runner), a channel ``tg``, the 45-tool MCP server
    ``many`` granted to the agent, the custom tool ``probe_tool``, daphne, and a member's key."""
    system = Actor.system(tenant_a)
    custom_services.custom_tool_create(
        actor=system,
        name="probe_tool",
        command="echo {{.text}}",
        description="Echo a text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    server = mcp_services.server_create(
        actor=system, name="many", transport="stdio", command=sys.executable, args=[str(MANY), "stdio"]
    )
    mcp_services.agent_grant_set(actor=system, server=server, agent=agent)
    mcp_client.refresh(server)
    channel = messaging_services.channel_create(
        actor=system, name="tg", kind="telegram", secret="123456:" + "a" * 30
    )
    key = factories.make_api_key(tenant_a, Role.MEMBER)
    api = factories.key_client(key)
    yield {
        "tenant": tenant_a,
        "system": system,
        "agent": agent,
        "channel": channel,
        "key": key,
        "api": api,
        "base": live.daphne(),
        "fake": fake,
    }
    manager = mcp_client.manager()
    manager.run(manager.close_all(), 60)


def _configure(
    world: dict[str, Any], tenant_doc: dict[str, Any], agent_doc: dict[str, Any], topic: Any
) -> None:
    system = world["system"]
    policy_services.policy_save(system, policy_services.target("tenant"), tenant_doc)
    policy_services.policy_save(system, policy_services.target("agent", agent=world["agent"]), agent_doc)
    messaging_services.channel_update(
        actor=system, channel=world["channel"], topics={CHAT: topic} if topic else {}
    )


def _query(scope: dict[str, Any], session_key: str) -> dict[str, str]:
    query = {"user_id": "alice", "session_key": session_key, "subagent_depth": str(scope["subagent_depth"])}
    if scope.get("provider"):
        query["provider"] = scope.get("provider", "")
    if scope["in_chat"]:
        query.update(channel="tg", chat_id=CHAT)
    if scope["tool_allow"] is not None:
        query["tool_allow"] = ",".join(scope["tool_allow"])
    return query


def _rest_listed(api: Any, query: dict[str, str]) -> list[str]:
    response = api.get("/api/v1/agents/bot/tools", {"format": "mcp", **query})
    assert response.status_code == 200, response.content
    return [tool["name"] for tool in response.json()["tools"]]


def _decision(tenant: Any, call_id: str) -> str:
    return str(ToolCall.objects.for_tenant(tenant).get(pk=call_id).decision)


def _rest_call(
    world: dict[str, Any], tool: str, args: dict[str, Any], query: dict[str, str]
) -> tuple[str, str]:
    context: dict[str, Any] = {
        key: value
        for key, value in query.items()
        if key in ("user_id", "session_key", "channel", "chat_id", "provider")
    }
    context["subagent_depth"] = int(query["subagent_depth"])
    if "tool_allow" in query:
        context["tool_allow"] = [name for name in query["tool_allow"].split(",") if name]
    body = {"agent": "bot", "tool": tool, "args": args, "context": context}
    response = world["api"].post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    return _decision(world["tenant"], answer["call_id"]), str(answer["for_llm"])


def _over_mcp(world: dict[str, Any], query: dict[str, str]) -> tuple[list[str], dict[str, str], str]:
    """The MCP endpoint's list, each probe's decision, and what a search finds (one session)."""

    async def go() -> tuple[list[str], dict[str, str], str]:
        async with session(endpoint(world["base"], query=urlencode(query)), world["key"]) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            decisions = {}
            for tool, args in PROBES.items():
                result = await client.call_tool(tool, args)
                decisions[tool] = (result.meta or {})["toolgate/call_id"]
            found = ""
            if "mcp_tool_search" in listed:
                result = await client.call_tool("mcp_tool_search", {"query": " ".join(SEARCHES.values())})
                found = "\n".join(getattr(block, "text", "") for block in result.content)
        return listed, decisions, found

    listed, call_ids, found = asyncio.run(go())
    return listed, {tool: _decision(world["tenant"], call_id) for tool, call_id in call_ids.items()}, found


def _runner(world: dict[str, Any], api: Any, provider: str) -> tuple[list[str], dict[str, str]]:
    """What the built-in runner offers the model, and the decisions on the model's probe calls."""
    fake = world["fake"]
    calls = [model_call(tool, args, n) for n, (tool, args) in enumerate(PROBES.items())]
    fake.chat = scripted(chat_answer("", tool_calls=calls), chat_answer("done"))
    session_key = f"run-{uuid.uuid4().hex[:8]}"
    response = api.post(
        "/api/v1/agents/bot/runs",
        {"session_key": session_key, "message": "probe", "user_id": "alice", "provider": provider},
        format="json",
    )
    assert response.status_code == 201, response.content
    offered = [tool["function"]["name"] for tool in fake.chat.requests[0].get("tools", [])]
    decisions = {
        str(tool): str(decision)
        for tool, decision in ToolCall.objects.for_tenant(world["tenant"])
        .filter(session_key=session_key)
        .values_list("tool", "decision")
    }
    return offered, decisions


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failure is reported as found: shrinking costs minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tenant_doc=tenant_documents, agent_doc=agent_documents, scope=scopes)
# Cases that once disagreed: a topic's list over MCP, an empty allow list, search mode with a denied tool.
@example(
    tenant_doc={"profile": "coding"},
    agent_doc={},
    scope={"topic": ["datetime", "group:memory"], "in_chat": True, "tool_allow": None, "subagent_depth": 0},
)
@example(
    tenant_doc={},
    agent_doc={"deny": ["exec"]},
    scope={"topic": ["exec"], "in_chat": False, "tool_allow": [], "subagent_depth": 1},
)
@example(
    tenant_doc={"deny": ["mcp_many__create_*"]},
    agent_doc={},
    scope={
        "topic": ["mcp_many__*", "mcp_tool_search"],
        "in_chat": True,
        "tool_allow": None,
        "subagent_depth": 0,
    },
)
@example(
    tenant_doc={
        "originDeny": {"user": ["exec", "probe_tool", "mcp_many__convert_currency"]},
        "byProvider": {
            "main": {"allow": ["group:fs", "exec", "probe_tool", "mcp_many__*", "mcp_tool_search"]}
        },
    },
    agent_doc={},
    scope={
        "topic": ["read_file"],
        "in_chat": False,
        "tool_allow": None,
        "subagent_depth": 0,
        "provider": "main",
    },
)
def test_every_transport_lists_what_it_lets_call(world, tenant_doc, agent_doc, scope):  # type: ignore[no-untyped-def]
    _configure(world, tenant_doc, agent_doc, scope["topic"])
    api = world["api"]
    query = _query(scope, f"s-{uuid.uuid4().hex[:8]}")

    rest_listed = _rest_listed(api, query)
    mcp_listed, mcp_decisions, found = _over_mcp(world, query)
    assert mcp_listed == rest_listed

    search_mode = "mcp_tool_search" in rest_listed
    for tool, args in PROBES.items():
        decision, answer = _rest_call(world, tool, args, query)
        callable_ = decision not in NOT_CALLABLE
        deferred = search_mode and tool in SEARCHES and tool in found
        assert callable_ == (tool in rest_listed or deferred), (tool, decision, answer, rest_listed)
        assert (mcp_decisions[tool] not in NOT_CALLABLE) == callable_, (tool, mcp_decisions[tool], decision)
        if tool in SEARCHES and search_mode:
            assert (tool in found) == callable_, (tool, found)

    # The runner's scope is its user's and provider's, without channel or allow list, at depth 0.
    plain = _query(
        {"in_chat": False, "tool_allow": None, "subagent_depth": 0, "provider": scope.get("provider", "")},
        f"p-{uuid.uuid4().hex[:8]}",
    )
    plain_listed = _rest_listed(api, plain)
    offered, run_decisions = _runner(world, api, scope.get("provider", ""))
    assert sorted(offered) == sorted(plain_listed)
    plain_search = "mcp_tool_search" in plain_listed
    for tool in PROBES:
        called = run_decisions[tool] not in NOT_CALLABLE
        if tool in SEARCHES and plain_search:
            continue  # deferred behind the search tool: callable or not, it is not listed
        assert called == (tool in plain_listed), (tool, run_decisions[tool], plain_listed)
