"""Tool listing for agent loops, the catalog, and the tool-call log."""

from __future__ import annotations

import json

import pytest

from apps.accounts import services
from apps.runtime import pipeline
from apps.tenants.actors import Actor
from apps.toolkit import gateway
from apps.tools.catalog import CATALOG, GROUPS, PROFILES

pytestmark = pytest.mark.django_db

SEED_INVENTORY = {
    "fs": {"read_file", "write_file", "edit", "list_files", "search", "glob"},
    "runtime": {"exec", "credentialed_exec"},
    "web": {"web_search", "web_fetch"},
    "memory": {"memory_search", "memory_get"},
    "sessions": {"sessions_list", "sessions_history", "sessions_send", "spawn", "session_status"},
    "knowledge": {"knowledge_graph_search", "skill_search"},
    "automation": {"cron", "datetime"},
    "messaging": {"message", "create_forum_topic"},
    "teams": {"team_tasks", "team_message"},
    "media_gen": {"create_image", "create_audio", "create_video", "tts"},
    "media_read": {"read_image", "read_audio", "read_document", "read_video"},
    "skills": {"use_skill", "publish_skill"},
}
UNGROUPED = {"openai_compat_call", "workspace_dir"}


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def withdrawn(monkeypatch):
    """credentialed_exec without its implementation, as in a deployment that does not provide it."""
    from apps.toolkit import registry

    monkeypatch.delitem(registry._IMPLEMENTATIONS, "credentialed_exec")
    return "credentialed_exec"


def test_every_inventory_tool_is_in_the_catalog_with_its_group(viewer_a, withdrawn):
    body = viewer_a.get("/api/v1/tools/catalog/").json()
    by_name = {t["name"]: t for t in body["tools"]}
    everything = set().union(*SEED_INVENTORY.values()) | UNGROUPED
    assert set(by_name) == everything
    for group, members in SEED_INVENTORY.items():
        assert set(body["groups"][group]) == members
        assert all(by_name[m]["group"] == group for m in members)
    assert set(body["groups"]["toolgate"]) == everything
    assert body["group_aliases"] == {"goclaw": "toolgate"}
    assert by_name["datetime"]["available"] is True
    assert by_name["credentialed_exec"]["available"] is False
    assert by_name["credentialed_exec"]["unavailable_reason"]
    assert by_name["read_file"]["capability"] == "read_only"
    assert by_name["spawn"]["capability"] == "async"
    assert by_name["exec"]["capability"] == "mutating"
    assert body["aliases"]["Bash"] == "exec"


def test_profiles_expand_as_specified():
    from apps.tools.catalog import profile_tools

    assert profile_tools("minimal") == {"session_status"}
    assert profile_tools("full") == set(CATALOG)
    assert profile_tools("messaging") == (
        set(GROUPS["messaging"])
        | set(GROUPS["web"])
        | set(GROUPS["sessions"])
        | set(GROUPS["media_read"])
        | {"skill_search"}
    )
    coding = set()
    for group in (
        "fs",
        "runtime",
        "sessions",
        "memory",
        "web",
        "knowledge",
        "media_gen",
        "media_read",
        "skills",
    ):
        coding |= set(GROUPS[group])
    assert profile_tools("coding") == coding
    assert set(PROFILES) == {"full", "coding", "messaging", "minimal"}


@pytest.mark.parametrize(
    ("fmt", "name_of"),
    [
        ("openai", lambda t: t["function"]["name"]),
        ("anthropic", lambda t: t["name"]),
        ("mcp", lambda t: t["name"]),
    ],
)
def test_listing_formats_are_sorted_and_complete(member_a, agent, fmt, name_of):
    body = member_a.get(f"/api/v1/agents/bot/tools?format={fmt}&include_unavailable=true").json()
    names = [name_of(t) for t in body["tools"]]
    assert names == sorted(CATALOG)
    assert body["count"] == len(CATALOG)
    first = body["tools"][0]
    schema_key = {"openai": None, "anthropic": "input_schema", "mcp": "inputSchema"}[fmt]
    schema = first["function"]["parameters"] if fmt == "openai" else first[schema_key]
    assert schema["type"] == "object"


def test_listing_hides_unavailable_tools_by_default(
    member_a, agent, withdrawn, django_assert_max_num_queries
):
    # The key (with its tenant), its first-use stamp, the agent, its policy documents, the MCP servers
    # and custom tools it may reach, and the credentialed CLIs it reaches (one query each).
    with django_assert_max_num_queries(7):
        body = member_a.get("/api/v1/agents/bot/tools").json()
    names = {t["function"]["name"] for t in body["tools"]}
    assert "datetime" in names
    assert "credentialed_exec" not in names


def test_listing_respects_subagent_depth_and_tool_allow(member_a, agent):
    body = member_a.get(
        "/api/v1/agents/bot/tools?include_unavailable=1&subagent_depth=1&tool_allow=group:sessions,cron"
    )
    names = {t["function"]["name"] for t in body.json()["tools"]}
    # subagents never get session_status/sessions_send/cron; at the leaf depth no spawn or history either
    assert names == set()
    body = member_a.get(
        "/api/v1/agents/bot/tools?include_unavailable=1&tool_allow=group:sessions,datetime"
    ).json()
    assert {t["function"]["name"] for t in body["tools"]} == set(GROUPS["sessions"]) | {"datetime"}


def test_strap_listing_is_a_fraction_of_the_flat_one_and_covers_every_tool(member_a, agent):
    flat = member_a.get("/api/v1/agents/bot/tools?include_unavailable=1").json()
    strap = member_a.get("/api/v1/agents/bot/tools?include_unavailable=1&style=strap").json()
    assert [t["function"]["name"] for t in strap["tools"]] == [
        "agent",
        "file",
        "media",
        "memory",
        "shell",
        "web",
    ]
    flat_size = len(json.dumps(flat["tools"]))
    strap_size = len(json.dumps(strap["tools"]))
    assert strap_size < flat_size * 0.75
    file_tool = next(t["function"] for t in strap["tools"] if t["function"]["name"] == "file")
    assert file_tool["parameters"]["properties"]["action"]["enum"] == [
        "edit",
        "glob",
        "grep",
        "list",
        "read",
        "write",
    ]


def test_listing_bad_parameters_and_unknown_agent(member_a, agent):
    bad = member_a.get("/api/v1/agents/bot/tools?format=xml")
    assert bad.status_code == 400
    assert "format" in bad.json()["error"]["details"]
    assert member_a.get("/api/v1/agents/ghost/tools").status_code == 404


def test_tool_call_log_filters_and_paginates(member_a, agent, tenant_a, django_assert_max_num_queries):
    actor = Actor.system(tenant_a)
    for tz in ("UTC", "Asia/Tokyo", "Nowhere/Land"):
        pipeline.execute(
            actor=actor,
            request=gateway.CallRequest(
                agent=agent, tool="datetime", args={"timezone": tz}, session_key="s9"
            ),
        )
    pipeline.execute(actor=actor, request=gateway.CallRequest(agent=agent, tool="nope"))
    with django_assert_max_num_queries(3):
        body = member_a.get("/api/v1/tool-calls/?page_size=2").json()
    assert len(body["results"]) == 2
    assert body["next"]
    assert len(member_a.get("/api/v1/tool-calls/?decision=unknown").json()["results"]) == 1
    errors = member_a.get("/api/v1/tool-calls/?tool=datetime&status=error").json()["results"]
    assert [e["args"] for e in errors] == [{"timezone": "Nowhere/Land"}]
    assert len(member_a.get("/api/v1/tool-calls/?session_key=s9").json()["results"]) == 3
    assert member_a.get("/api/v1/tool-calls/?status=maybe").status_code == 400
