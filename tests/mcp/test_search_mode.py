"""MCP search mode (SPEC B §3.3): an agent reaching more than 40 MCP tools gets ``mcp_tool_search`` in
its listing instead of them; a search ranks the tools it may call (BM25), answers their definitions and
activates them for the session; deferred tools stay callable. Against a real SDK server with 45 tools
over stdio, through the REST API and Toolgate's own MCP endpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from apps.accounts import services as tenant_services
from apps.mcp_grants import client, services
from apps.policy import services as policy_services
from apps.tenants.actors import Actor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

MANY = Path(__file__).parent / "servers" / "many.py"


@pytest.fixture
def many(tenant_a):
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    server = services.server_create(
        actor=system, name="many", transport="stdio", command=sys.executable, args=[str(MANY), "stdio"]
    )
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    return server, agent


def listed(api, **params) -> set[str]:
    response = api.get("/api/v1/agents/bot/tools", {"format": "mcp", **params})
    assert response.status_code == 200, response.content
    return {t["name"] for t in response.json()["tools"]}


def call(api, tool, args, **context):
    body = {"agent": "bot", "tool": tool, "args": args, "context": context}
    response = api.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_many_tools_are_deferred_behind_the_search_tool(member_a, many):
    names = listed(member_a)
    assert "mcp_tool_search" in names
    assert not [n for n in names if n.startswith("mcp_many__")]


def test_a_search_ranks_activates_and_the_tool_is_then_listed_for_that_session(member_a, many):
    body = call(member_a, "mcp_tool_search", {"query": "convert money between currencies"}, session_key="s1")

    assert body["is_error"] is False, body
    first = body["for_llm"].splitlines()[1]
    assert first.startswith("- mcp_many__convert_currency: Convert an amount of money")
    assert "mcp_many__convert_currency" in listed(member_a, session_key="s1")
    assert "mcp_many__convert_currency" not in listed(member_a, session_key="s2")
    answer = call(member_a, "mcp_many__convert_currency", {"text": "10 EUR"}, session_key="s1")
    assert json.loads(answer["for_llm"]) == {"tool": "convert_currency", "text": "10 EUR"}


def test_deferred_tools_stay_callable_and_unknown_searches_say_so(member_a, many):
    answer = call(member_a, "mcp_many__weather_forecast", {"text": "Paris"})
    assert json.loads(answer["for_llm"])["tool"] == "weather_forecast"
    nothing = call(member_a, "mcp_tool_search", {"query": "zebra xylophone"})
    assert nothing["is_error"] is False
    assert nothing["for_llm"].startswith("No MCP tool matches")
    bad = call(member_a, "mcp_tool_search", {"query": "x", "limit": 0})
    assert bad["is_error"] is True


def test_a_search_only_finds_tools_the_agent_may_call(member_a, many, tenant_a):
    server, agent = many
    services.agent_grant_set(
        actor=Actor.system(tenant_a), server=server, agent=agent, tool_deny=["create_issue"]
    )
    body = call(member_a, "mcp_tool_search", {"query": "open a new issue in the bug tracker"})
    assert "mcp_many__create_issue" not in body["for_llm"]
    assert "create_issue" not in json.dumps(body)


def test_a_search_never_offers_or_activates_a_tool_the_policy_denies(member_a, many, tenant_a):
    target = policy_services.target("tenant")
    policy_services.policy_save(
        Actor.system(tenant_a),
        target,
        {"allow": ["group:fs", "mcp_tool_search"], "deny": ["mcp_many__create_*"]},
    )
    body = call(
        member_a, "mcp_tool_search", {"query": "open a new issue in the bug tracker"}, session_key="s1"
    )
    assert body["is_error"] is False, body
    assert "create_issue" not in json.dumps(body)  # granted on the server, but denied by the policy
    assert "mcp_many__create_issue" not in listed(member_a, session_key="s1")
    refused = call(member_a, "mcp_many__create_issue", {"text": "x"}, session_key="s1")
    assert refused["for_llm"] == "tool not allowed by policy: mcp_many__create_issue"
    # the same search narrowed by the call's own allow list offers nothing outside it either
    narrowed = call(
        member_a,
        "mcp_tool_search",
        {"query": "convert money between currencies"},
        session_key="s2",
        tool_allow=["mcp_tool_search", "mcp_many__weather_*"],
    )
    assert "convert_currency" not in json.dumps(narrowed)


def test_without_the_search_tool_in_the_policy_every_tool_is_listed(member_a, many, tenant_a):
    target = policy_services.target("tenant")
    policy_services.policy_save(Actor.system(tenant_a), target, {"allow": ["group:fs", "mcp_many__*"]})
    names = listed(member_a)
    assert "mcp_tool_search" not in names
    assert len([n for n in names if n.startswith("mcp_many__")]) == 45


def test_up_to_forty_tools_there_is_no_search_tool(member_a, many, tenant_a):
    server, agent = many
    services.agent_grant_set(
        actor=Actor.system(tenant_a),
        server=server,
        agent=agent,
        tool_deny=[f"record_{n}" for n in range(30, 40)],
    )
    names = listed(member_a)
    assert "mcp_tool_search" not in names
    assert len([n for n in names if n.startswith("mcp_many__")]) == 35
    refused = call(member_a, "mcp_tool_search", {"query": "currency"})
    assert refused["is_error"] is True
