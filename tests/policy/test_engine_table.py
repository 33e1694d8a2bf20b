"""The policy pipeline (SPEC Part A "Policy", B §1.2), one configuration per row, through the HTTP API.

Each row gives the policy documents, the call's context and the allowed set, written out by hand. For
every row the tool listing must return exactly that set, and executing every catalog tool must be
refused with ``tool not allowed by policy: <name>`` exactly for the tools outside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy
from apps.policy.models import PolicyDocument
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db

FS = {"edit", "glob", "list_files", "read_file", "search", "write_file"}
WEB = {"web_fetch", "web_search"}
MEDIA_READ = {"read_audio", "read_document", "read_image", "read_video"}
MESSAGING_GROUP = {"create_forum_topic", "message"}
ALL = {
    "create_audio", "create_forum_topic", "create_image", "create_video", "credentialed_exec", "cron",
    "datetime", "edit", "exec", "glob", "knowledge_graph_search", "list_files", "memory_get",
    "memory_search", "message", "openai_compat_call", "publish_skill", "read_audio", "read_document",
    "read_file", "read_image", "read_video", "search", "session_status", "sessions_history",
    "sessions_list", "sessions_send", "skill_search", "spawn", "team_message", "team_tasks", "tts",
    "use_skill", "web_fetch", "web_search", "workspace_dir", "write_file",
}  # fmt: skip
CODING = {
    "edit", "glob", "list_files", "read_file", "search", "write_file",  # fs
    "credentialed_exec", "exec",  # runtime
    "session_status", "sessions_history", "sessions_list", "sessions_send", "spawn",  # sessions
    "memory_get", "memory_search", "web_fetch", "web_search",  # memory, web
    "knowledge_graph_search", "skill_search",  # knowledge
    "create_audio", "create_image", "create_video", "tts",  # media_gen
    "read_audio", "read_document", "read_image", "read_video",  # media_read
    "publish_skill", "use_skill",  # skills
}  # fmt: skip
MESSAGING = {
    "create_forum_topic", "message", "web_fetch", "web_search",
    "session_status", "sessions_history", "sessions_list", "sessions_send", "spawn",
    "read_audio", "read_document", "read_image", "read_video", "skill_search",
}  # fmt: skip
SUBAGENT_ALWAYS = {"session_status", "cron", "memory_search", "memory_get", "sessions_send", "team_tasks"}
SUBAGENT_LEAF = {"sessions_list", "sessions_history", "spawn"}


@dataclass
class Row:
    expected: set[str]
    tenant: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    channels: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    raw_tenant: dict[str, Any] | None = None  # stored as is: names that no longer exist
    provider: str = ""
    channel: str = ""
    chat_id: str = ""
    subagent_depth: int = 0
    tool_allow: list[str] | None = None


ROWS: dict[str, Row] = {
    # profiles
    "default is full": Row(ALL),
    "profile full": Row(ALL, tenant={"profile": "full"}),
    "profile coding": Row(CODING, tenant={"profile": "coding"}),
    "profile messaging": Row(MESSAGING, tenant={"profile": "messaging"}),
    "profile minimal": Row({"session_status"}, tenant={"profile": "minimal"}),
    # a provider profile narrows the tenant's, never widens it (the provider is the request's word)
    "provider profile cannot widen minimal to full": Row(
        {"session_status"},
        tenant={"profile": "minimal", "byProvider": {"openai": {"profile": "full"}}},
        provider="openai",
    ),
    "provider profile of another provider": Row(
        {"session_status"},
        tenant={"profile": "minimal", "byProvider": {"openai": {"profile": "full"}}},
        provider="anthropic",
    ),
    "provider profile intersects coding with messaging": Row(
        CODING & MESSAGING,
        tenant={"profile": "coding", "byProvider": {"openai": {"profile": "messaging"}}},
        provider="openai",
    ),
    # allow intersections, step by step
    "tenant allow": Row(FS | {"datetime"}, tenant={"allow": ["group:fs", "datetime"]}),
    "tenant allow within the profile": Row(
        {"web_search", "message"},
        tenant={"profile": "messaging", "allow": ["group:fs", "web_search", "message"]},
    ),
    "tenant provider allow": Row(
        {"read_file", "web_fetch"},
        tenant={
            "allow": ["group:fs", "group:web"],
            "byProvider": {"openai": {"allow": ["read_file", "web_fetch", "tts"]}},
        },
        provider="openai",
    ),
    "tenant provider allow, no provider": Row(
        FS | WEB,
        tenant={
            "allow": ["group:fs", "group:web"],
            "byProvider": {"openai": {"allow": ["read_file", "web_fetch", "tts"]}},
        },
    ),
    "agent allow": Row(
        {"web_fetch", "web_search", "exec", "datetime"}, agent={"allow": ["group:web", "exec", "datetime"]}
    ),
    "agent allow within tenant allow": Row(
        {"read_file", "exec"},
        tenant={"allow": ["group:fs", "exec"]},
        agent={"allow": ["read_file", "exec", "datetime"]},
    ),
    "agent provider allow": Row(
        {"read_file", "write_file"},
        agent={
            "allow": ["group:fs"],
            "byProvider": {"openai": {"allow": ["read_file", "write_file", "exec"]}},
        },
        provider="openai",
    ),
    "channel allow": Row(
        {"create_forum_topic", "message", "datetime"},
        channels=[("telegram", "", {"allow": ["group:messaging", "datetime"]})],
        channel="telegram",
    ),
    "channel allow of another channel": Row(
        ALL, channels=[("telegram", "", {"allow": ["group:messaging", "datetime"]})], channel="discord"
    ),
    "chat group over its channel": Row(
        {"datetime", "tts"},
        channels=[
            ("telegram", "", {"allow": ["group:messaging"]}),
            ("telegram", "42", {"allow": ["datetime", "tts"]}),
        ],
        channel="telegram",
        chat_id="42",
    ),
    "another chat falls back to the channel": Row(
        {"create_forum_topic", "message"},
        channels=[
            ("telegram", "", {"allow": ["group:messaging"]}),
            ("telegram", "42", {"allow": ["datetime", "tts"]}),
        ],
        channel="telegram",
        chat_id="7",
    ),
    "every intersection at once": Row(
        {"read_file", "web_search", "datetime"},
        tenant={
            "allow": ["group:toolgate"],
            "byProvider": {"openai": {"allow": ["group:fs", "group:web", "datetime", "exec"]}},
        },
        agent={
            "allow": ["group:fs", "group:web", "datetime"],
            "byProvider": {"openai": {"allow": ["read_file", "web_search", "datetime", "list_files"]}},
        },
        channels=[("tg", "", {"allow": ["read_file", "datetime", "web_search", "tts"]})],
        provider="openai",
        channel="tg",
    ),
    # deny, then alsoAllow
    "tenant deny": Row(ALL - {"exec", "web_fetch", "web_search"}, tenant={"deny": ["exec", "group:web"]}),
    "agent deny": Row(CODING - FS, tenant={"profile": "coding"}, agent={"deny": ["group:fs"]}),
    "alsoAllow re-adds a denied tool": Row(ALL, tenant={"deny": ["exec"], "alsoAllow": ["exec"]}),
    "alsoAllow adds outside the profile": Row(
        {"session_status", "datetime", "team_message", "team_tasks"},
        tenant={"profile": "minimal", "alsoAllow": ["datetime", "group:teams"]},
    ),
    "agent alsoAllow beats agent allow and deny": Row(
        FS | {"cron"},
        tenant={"profile": "coding"},
        agent={"allow": ["group:fs"], "deny": ["write_file"], "alsoAllow": ["write_file", "cron"]},
    ),
    "alsoAllow beats the channel allow": Row(
        {"datetime", "tts"},
        agent={"alsoAllow": ["tts"]},
        channels=[("tg", "", {"allow": ["datetime"]})],
        channel="tg",
    ),
    # groups
    "group:toolgate": Row(ALL, tenant={"profile": "minimal", "alsoAllow": ["group:toolgate"]}),
    "group:goclaw is group:toolgate": Row(
        MEDIA_READ,
        tenant={"allow": ["group:goclaw"], "deny": ["group:goclaw"], "alsoAllow": ["group:media_read"]},
    ),
    # names that disappeared after the policy was saved match nothing
    "a vanished name in allow": Row({"datetime"}, raw_tenant={"allow": ["vanished_tool", "datetime"]}),
    "only vanished names in allow": Row(set(), raw_tenant={"allow": ["vanished_tool", "group:vanished"]}),
    "a vanished name in deny": Row(
        {"session_status"}, raw_tenant={"profile": "minimal", "deny": ["vanished_tool", "group:gone"]}
    ),
    # * patterns
    "patterns in allow": Row(MEDIA_READ | {"read_file"} | WEB, tenant={"allow": ["read_*", "web_*"]}),
    "patterns in deny": Row(
        ALL - {"read_file", "write_file", "list_files", "sessions_history", "sessions_list", "sessions_send"},
        tenant={"deny": ["*_file*", "sessions_*"]},
    ),
    "patterns are case-sensitive": Row({"datetime"}, tenant={"allow": ["Read_*", "datetime"]}),
    "patterns in alsoAllow": Row(
        {"session_status", "create_audio", "create_forum_topic", "create_image", "create_video"},
        tenant={"profile": "minimal", "alsoAllow": ["create_*"]},
    ),
    # subagents (depth 1 is the maximum: the leaf list applies too)
    "subagent at depth 1": Row(ALL - SUBAGENT_ALWAYS - SUBAGENT_LEAF, subagent_depth=1),
    "subagent with a profile": Row(
        {
            "create_forum_topic",
            "message",
            "web_fetch",
            "web_search",
            "read_audio",
            "read_document",
            "read_image",
            "read_video",
            "skill_search",
        },
        tenant={"profile": "messaging"},
        subagent_depth=1,
    ),
    "alsoAllow does not outlive the subagent lists": Row(
        set(), tenant={"profile": "minimal", "alsoAllow": ["cron"]}, subagent_depth=1
    ),
    # the request's own allow list is the final intersection
    "request allow": Row(
        {"read_file", "exec", "web_fetch", "web_search"}, tool_allow=["read_file", "exec", "group:web"]
    ),
    "request allow narrows alsoAllow again": Row(
        {"read_file"}, tenant={"deny": ["exec"], "alsoAllow": ["exec"]}, tool_allow=["read_file"]
    ),
    "an empty request allow list": Row(set(), tool_allow=[]),
    "request allow with a pattern": Row(
        WEB, tenant={"profile": "messaging"}, tool_allow=["web_*", "datetime"]
    ),
    "request allow after the subagent lists": Row({"exec"}, subagent_depth=1, tool_allow=["spawn", "exec"]),
}


def _configure(row: Row):  # type: ignore[no-untyped-def]
    tenant = factories.make_tenant()
    system = Actor.system(tenant)
    agent = services.agent_create(actor=system, key="bot", name="Bot")
    if row.tenant is not None:
        policy.policy_save(system, policy.target("tenant"), row.tenant)
    if row.raw_tenant is not None:
        PolicyDocument.objects.create(tenant=tenant, scope="tenant", document=row.raw_tenant, version=1)
    if row.agent is not None:
        policy.policy_save(system, policy.target("agent", agent=agent), row.agent)
    for channel, chat_id, document in row.channels:
        policy.policy_save(system, policy.target("channel", channel=channel, chat_id=chat_id), document)
    return tenant, factories.key_client(factories.make_api_key(tenant, Role.MEMBER))


def test_there_are_enough_rows_and_the_hand_written_sets_are_the_catalog():
    from apps.tools.catalog import CATALOG

    assert len(ROWS) >= 30
    assert set(CATALOG) == ALL


@pytest.mark.parametrize("name", list(ROWS))
def test_listing_and_execution_follow_the_policy(name):
    row = ROWS[name]
    tenant, client = _configure(row)
    query = {
        "include_unavailable": "true",
        "format": "mcp",
        "provider": row.provider,
        "channel": row.channel,
        "chat_id": row.chat_id,
        "subagent_depth": str(row.subagent_depth),
    }
    if row.tool_allow is not None:
        query["tool_allow"] = ",".join(row.tool_allow) or ","  # "," is an empty list; "" is none

    listed = client.get("/api/v1/agents/bot/tools", query)

    assert listed.status_code == 200, listed.content
    assert [t["name"] for t in listed.json()["tools"]] == sorted(row.expected)

    context = {
        "provider": row.provider,
        "channel": row.channel,
        "chat_id": row.chat_id,
        "subagent_depth": row.subagent_depth,
        "tool_allow": row.tool_allow,
    }
    refused = set()
    for tool in sorted(ALL):
        response = client.post(
            "/api/v1/runtime/execute",
            {"agent": "bot", "tool": tool, "args": {}, "context": context},
            format="json",
        )
        assert response.status_code == 200, response.content
        if response.json()["for_llm"] == f"tool not allowed by policy: {tool}":
            refused.add(tool)
    assert refused == ALL - row.expected
    decisions = dict(ToolCall.objects.for_tenant(tenant).values_list("tool", "decision"))
    assert set(decisions) == ALL
    assert {tool for tool, decision in decisions.items() if decision == "denied"} == ALL - row.expected
