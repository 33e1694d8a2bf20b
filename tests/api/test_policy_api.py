"""The policy API: documents per scope, validation, versions and rollback, explain, preview, import and
export, each write audited, published and seen by the very next tool call."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.policy.models import PolicyDocument, PolicyVersion
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api import roles_policy
from tests.api.personas import check_personas
from tests.api.personas import error as _error
from tests.api.tenant_state import tenant_state
from tests.api.test_roles import _targets

pytestmark = pytest.mark.django_db

TENANT = "/api/v1/policy/tenant/"
AGENT = "/api/v1/policy/agents/bot/"
EXPORT = "/api/v1/policy/export"
PREVIEW = "/api/v1/policy/preview"
VERSIONS = "/api/v1/policy/versions/"


@pytest.fixture
def bot(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def _listed(client, key: str = "bot", query: str = "") -> list[str]:
    response = client.get(f"/api/v1/agents/{key}/tools?include_unavailable=true&format=mcp&{query}")
    assert response.status_code == 200, response.content
    return [tool["name"] for tool in response.json()["tools"]]


def _execute(client, tool: str, **context: Any) -> dict[str, Any]:
    response = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": tool, "args": {}, "context": context},
        format="json",
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _config_version(tenant: Tenant) -> int:
    return Tenant.objects.get(pk=tenant.pk).config_version


# --- personas ---------------------------------------------------------------------------------------


def _outsider_status(method: str, template: str, success: int) -> int:
    """Tenant B's owner on a URL built from tenant A's objects: 404 for A's agent, version or channel
    group; what B's own tenant would answer elsewhere (B's own policy, never A's)."""
    path = template.split("?")[0]
    if "{agent}" in path or "{policy_version}" in path or path.endswith("preview"):
        return 404
    if "/channels/{policy_channel}/" in path and method != "put":
        return 404  # B has no such channel group (a PUT creates B's own)
    if method == "delete":
        return 404  # B's tenant has no policy to delete
    if path.endswith("export") and method == "put":
        return 400  # the bundle names A's agent: B has none of that key
    return success


@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"),
    roles_policy.ACTIONS,
    ids=[f"{a[0]} {a[1]}" for a in roles_policy.ACTIONS],
)
def test_personas_on_every_route(method, template, body, least, success, request, tenant_a):
    check_personas(
        request,
        tenant_a,
        method=method,
        url=template.format(**_targets(tenant_a)),
        body=body,
        least=least,
        success=success,
        outsider_status=_outsider_status(method, template, success),
    )


# --- documents ---------------------------------------------------------------------------------------


def test_tenant_policy_put_get_unchanged_and_delete(admin_a, viewer_a, tenant_a):
    assert viewer_a.get(TENANT).json() == {
        "scope": "tenant",
        "agent": None,
        "channel": None,
        "chat_id": None,
        "document": {},
        "version": 0,
        "updated_at": None,
    }

    saved = admin_a.put(
        TENANT,
        {"document": {"profile": "coding", "deny": ["exec", "exec"]}, "note": "tighten"},
        format="json",
    )
    assert saved.status_code == 200
    body = saved.json()
    assert body["document"] == {"profile": "coding", "deny": ["exec"]}  # as stored: deduplicated
    assert (body["version"], body["changed"], body["warnings"]) == (1, True, [])
    first_update = body["updated_at"]
    assert viewer_a.get(TENANT).json()["document"] == {"profile": "coding", "deny": ["exec"]}

    versions, audits, config = (
        PolicyVersion.objects.for_tenant(tenant_a).count(),
        AuditEvent.objects.for_tenant(tenant_a).count(),
        _config_version(tenant_a),
    )
    again = admin_a.put(TENANT, {"document": {"profile": "coding", "deny": ["exec"]}}, format="json").json()
    assert (again["version"], again["changed"]) == (1, False)
    assert PolicyVersion.objects.for_tenant(tenant_a).count() == versions
    assert AuditEvent.objects.for_tenant(tenant_a).count() == audits
    assert _config_version(tenant_a) == config

    changed = admin_a.put(TENANT, {"document": {"profile": "minimal"}}, format="json").json()
    assert (changed["version"], changed["changed"]) == (2, True)
    assert changed["updated_at"] > first_update

    assert admin_a.delete(TENANT).status_code == 204
    assert viewer_a.get(TENANT).json()["version"] == 0
    assert viewer_a.get(TENANT).json()["document"] == {}
    assert _error(admin_a.delete(TENANT), 404, "not_found")["message"] == "The tenant has no policy."
    numbers = [(v["number"], v["document"], v["note"]) for v in viewer_a.get(VERSIONS).json()["results"]]
    assert numbers == [
        (3, None, "deleted"),
        (2, {"profile": "minimal"}, ""),
        (1, {"profile": "coding", "deny": ["exec"]}, "tighten"),
    ]


def test_agent_policy_is_reached_through_its_agent(admin_a, outsider, tenant_a, bot):
    saved = admin_a.put(AGENT, {"document": {"allow": ["group:fs"], "deny": ["write_file"]}}, format="json")
    assert saved.status_code == 200
    assert saved.json()["agent"] == "bot"
    assert admin_a.get(AGENT).json()["document"] == {"allow": ["group:fs"], "deny": ["write_file"]}
    assert _listed(admin_a) == ["edit", "glob", "list_files", "read_file", "search"]

    before = tenant_state(tenant_a)
    assert _error(outsider.get(AGENT), 404, "not_found")
    assert _error(outsider.put(AGENT, {"document": {}}, format="json"), 404, "not_found")
    assert _error(outsider.delete(AGENT), 404, "not_found")
    assert _error(admin_a.get("/api/v1/policy/agents/nobody/"), 404, "not_found")
    assert tenant_state(tenant_a) == before

    assert admin_a.delete(AGENT).status_code == 204
    assert len(_listed(admin_a)) == 37


def test_channel_groups_and_chat_specific_groups(admin_a, viewer_a, tenant_a, bot):
    url = "/api/v1/policy/channels/telegram/"
    assert _error(viewer_a.get(url), 404, "not_found")["message"] == "The channel telegram has no policy."
    assert (
        admin_a.put(url, {"document": {"allow": ["group:web", "datetime"]}}, format="json").status_code == 200
    )
    chat = admin_a.put(url + "?chat_id=42", {"document": {"allow": ["web_search"]}}, format="json").json()
    assert (chat["channel"], chat["chat_id"], chat["version"]) == ("telegram", "42", 1)
    admin_a.put("/api/v1/policy/channels/discord/", {"document": {"allow": ["tts"]}}, format="json")

    listed = viewer_a.get("/api/v1/policy/channels/").json()
    assert [(c["channel"], c["chat_id"], c["document"], c["version"]) for c in listed] == [
        ("discord", "", {"allow": ["tts"]}, 1),
        ("telegram", "", {"allow": ["group:web", "datetime"]}, 1),
        ("telegram", "42", {"allow": ["web_search"]}, 1),
    ]
    assert viewer_a.get(url + "?chat_id=42").json()["document"] == {"allow": ["web_search"]}
    # the chat's own group wins over the channel's; another chat gets the channel's
    assert _listed(viewer_a, query="channel=telegram&chat_id=42") == ["web_search"]
    assert _listed(viewer_a, query="channel=telegram&chat_id=7") == ["datetime", "web_fetch", "web_search"]

    assert admin_a.delete(url + "?chat_id=42").status_code == 204
    assert _listed(viewer_a, query="channel=telegram&chat_id=42") == ["datetime", "web_fetch", "web_search"]
    assert _error(admin_a.delete(url + "?chat_id=42"), 404, "not_found")


def test_channel_input_is_bounded(admin_a, tenant_a):
    before = tenant_state(tenant_a)
    long_name = "c" * 101
    error = _error(
        admin_a.put(f"/api/v1/policy/channels/{long_name}/", {"document": {}}, format="json"), 400, "invalid"
    )
    assert "1 to 100 printable characters" in error["message"]
    error = _error(
        admin_a.put("/api/v1/policy/channels/tg/?chat_id=" + "9" * 201, {"document": {}}, format="json"),
        400,
        "invalid",
    )
    assert "chat_id" in error["details"]
    error = _error(admin_a.get("/api/v1/policy/channels/tg/?chat=1"), 400, "invalid")
    assert error["details"] == {"chat": ["Unknown field."]}
    error = _error(
        admin_a.put("/api/v1/policy/channels/tg/", {"document": {"deny": ["exec"]}}, format="json"),
        400,
        "invalid",
    )
    assert error["details"] == {"deny": ["Unknown key; a channel policy takes allow."]}
    assert tenant_state(tenant_a) == before


# --- validation ---------------------------------------------------------------------------------------


def test_unknown_names_are_refused_with_close_matches_and_paths(admin_a, tenant_a, bot):
    before = tenant_state(tenant_a)
    document = {
        "profile": "codng",
        "allow": ["read_file", "web_fetc"],
        "deny": ["group:fss"],
        "byProvider": {"openai": {"allow": ["datetime", "sesions_list"], "profile": "ful"}},
    }
    error = _error(admin_a.put(TENANT, {"document": document}, format="json"), 400, "invalid")
    assert error["details"] == {
        "profile": [
            "Unknown profile 'codng'; use one of full, coding, messaging, minimal; did you mean coding?"
        ],
        "allow[1]": ["Unknown tool 'web_fetc'; did you mean web_fetch, web_search?"],
        "deny[0]": ["Unknown group 'group:fss'; did you mean group:fs?"],
        "byProvider.openai.allow[1]": [
            "Unknown tool 'sesions_list'; did you mean sessions_list, sessions_history, sessions_send?"
        ],
        "byProvider.openai.profile": [
            "Unknown profile 'ful'; use one of full, coding, messaging, minimal; did you mean full?"
        ],
    }
    assert error["message"].startswith("profile: Unknown profile 'codng'")
    error = _error(admin_a.put(AGENT, {"document": {"deny": ["zzzz"]}}, format="json"), 400, "invalid")
    assert error["details"] == {"deny[0]": ["Unknown tool 'zzzz'"]}
    assert tenant_state(tenant_a) == before


def test_aliases_are_refused_naming_the_tool(admin_a, tenant_a):
    before = tenant_state(tenant_a)
    error = _error(
        admin_a.put(TENANT, {"document": {"deny": ["bash", "Edit"]}}, format="json"), 400, "invalid"
    )
    assert error["details"] == {
        "deny[0]": ["'bash' is an alias; policies name tools: use 'exec'."],
        "deny[1]": ["'Edit' is an alias; policies name tools: use 'edit'."],
    }
    assert "use 'exec'" in error["message"]
    assert tenant_state(tenant_a) == before


def test_patterns_are_accepted_and_one_matching_nothing_warns(admin_a, viewer_a, bot):
    saved = admin_a.put(TENANT, {"document": {"allow": ["web_*", "mcp_github__*", "read_*"]}}, format="json")
    assert saved.status_code == 200
    assert saved.json()["warnings"] == ["allow[1]: the pattern 'mcp_github__*' matches no tool today."]
    assert _listed(viewer_a) == [
        "read_audio",
        "read_document",
        "read_file",
        "read_image",
        "read_video",
        "web_fetch",
        "web_search",
    ]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"document": [1]}, "document", "Must be a JSON object."),
        ({"document": {"allow": "exec"}}, "allow", "Must be a list of tool names"),
        ({"document": {"allow": ["read file"]}}, "allow[0]", "printable characters without spaces"),
        ({"document": {"allow": [""]}}, "allow[0]", "Must be a non-empty string."),
        ({"document": {"allow": ["datetime"] * 1001}}, "allow", "At most 1000 entries."),
        ({"document": {"rate_limit_per_hour": -1}}, "rate_limit_per_hour", "from 0 (no limit) to 1000000"),
        ({"document": {"rate_limit_per_hour": True}}, "rate_limit_per_hour", "from 0 (no limit) to 1000000"),
        ({"document": {"scrub_credentials": "yes"}}, "scrub_credentials", "Must be true or false."),
        ({"document": {"execApproval": {"security": "most"}}}, "execApproval.security", "Must be one of"),
        ({"document": {"shellDenyGroups": {"nope": True}}}, "shellDenyGroups", "unknown deny group 'nope'"),
        ({"document": {"originDeny": {"robot": ["exec"]}}}, "originDeny.robot", "Unknown origin"),
        ({"document": {"allw": ["exec"]}}, "allw", "did you mean allow"),
        ({"document": {"x": "y" * 70_000}}, "document", "at most 65536 bytes"),
        ({"document": {}, "note": "n" * 201}, "note", "no more than 200 characters"),
        ({"document": {}, "extra": 1}, "extra", "Unknown field."),
        ({"note": "no document"}, "document", "required"),
    ],
)
def test_hostile_documents_are_400_and_change_nothing(admin_a, tenant_a, body, field, message):
    before = tenant_state(tenant_a)
    error = _error(admin_a.put(TENANT, body, format="json"), 400, "invalid")
    assert field in error["details"], error
    assert message in " ".join(error["details"][field])
    assert tenant_state(tenant_a) == before


def test_malformed_bodies(admin_a, tenant_a):
    before = tenant_state(tenant_a)
    _error(admin_a.put(TENANT, "{", content_type="application/json"), 400, "malformed_json")
    assert _error(admin_a.put(TENANT, [1], format="json"), 400, "invalid")["message"] == (
        "Expected a JSON object, got list."
    )
    _error(
        admin_a.put(TENANT, "x=1", content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )
    assert tenant_state(tenant_a) == before


GOCLAW_TOOLS = {
    "profile": "coding",
    "byProvider": {
        "anthropic": {"profile": "full", "allow": ["group:goclaw"]},
        "openai": {"allow": ["group:fs", "web_search", "exec"], "deny": ["exec"]},
    },
    "allow": ["group:goclaw"],
    "deny": ["exec"],
    "alsoAllow": ["datetime"],
    "shellDenyGroups": {"package_install": False, "network_recon": True},
    "execApproval": {"security": "allowlist", "ask": "on-miss", "allowlist": ["git *", "ls"]},
    "rate_limit_per_hour": 60,
    "scrub_credentials": True,
    "commandKeywordAllowlist": ["git"],
    "web_fetch": {"policy": "allow_all", "blocked_domains": []},
    "browser": {"enabled": False},
    "mcp_servers": {"github": {"command": "npx"}},
}
GOCLAW_AGENT = {
    "profile": "minimal",
    "allow": ["group:fs", "exec", "web_search"],
    "deny": ["write_file"],
    "alsoAllow": ["datetime"],
    "byProvider": {"openai": {"allow": ["read_file", "exec"], "profile": "full"}},
    "wait": {"min_ms": 100, "max_ms": 500},
    "toolCallPrefix": "proxy_",
}


def test_goclaw_documents_import_unchanged_with_warnings(admin_a, viewer_a, bot):
    saved = admin_a.put(TENANT, {"document": GOCLAW_TOOLS}, format="json")
    assert saved.status_code == 200, saved.content
    ignored = {"commandKeywordAllowlist", "web_fetch", "browser", "mcp_servers"}
    expected = {k: v for k, v in GOCLAW_TOOLS.items() if k not in ignored}
    expected["byProvider"] = {
        "anthropic": {"profile": "full", "allow": ["group:goclaw"]},
        "openai": {"allow": ["group:fs", "web_search", "exec"]},
    }
    assert saved.json()["document"] == expected
    warnings = saved.json()["warnings"]
    assert len(warnings) == 5
    assert "byProvider.openai.deny is ignored: deny lists apply to every provider." in warnings
    for key in ignored:
        assert any(w.startswith(f"{key} is ignored: ") for w in warnings), key

    agent = admin_a.put(AGENT, {"document": GOCLAW_AGENT}, format="json")
    assert agent.status_code == 200, agent.content
    assert agent.json()["document"] == {
        "allow": ["group:fs", "exec", "web_search"],
        "deny": ["write_file"],
        "alsoAllow": ["datetime"],
        "byProvider": {"openai": {"allow": ["read_file", "exec"]}},
    }
    assert sorted(w.split(" ")[0] for w in agent.json()["warnings"]) == [
        "byProvider.openai.profile",
        "profile",
        "toolCallPrefix",
        "wait",
    ]

    # coding, the goclaw group and the agent's allow; minus exec (tenant) and write_file; plus datetime
    assert _listed(viewer_a) == [
        "datetime",
        "edit",
        "glob",
        "list_files",
        "read_file",
        "search",
        "web_search",
    ]
    # openai: the tenant's provider allow and the agent's narrow to read_file (exec stays denied)
    assert _listed(viewer_a, query="provider=openai") == ["datetime", "read_file"]
    # anthropic: the provider profile full replaces coding; the same agent lists apply
    assert _listed(viewer_a, query="provider=anthropic") == _listed(viewer_a)


# --- versions and rollback -------------------------------------------------------------------------------


def test_versions_number_each_change_with_diff_and_author(admin_a, viewer_a, bot):
    me = admin_a.get("/api/v1/me/").json()
    admin_a.put(TENANT, {"document": {"deny": ["exec"]}, "note": "no shell"}, format="json")
    admin_a.put(TENANT, {"document": {"deny": ["exec"]}}, format="json")  # unchanged: no version
    admin_a.put(TENANT, {"document": {"profile": "coding", "deny": ["tts", "exec"]}}, format="json")
    admin_a.put(AGENT, {"document": {"alsoAllow": ["exec"]}}, format="json")

    page = viewer_a.get(VERSIONS).json()
    assert [(v["scope"], v["agent"], v["number"]) for v in page["results"]] == [
        ("agent", "bot", 1),
        ("tenant", None, 2),
        ("tenant", None, 1),
    ]
    latest_tenant = page["results"][1]
    assert latest_tenant["diff"] == {
        "deny": {"added": ["tts"], "removed": []},
        "profile": {"from": None, "to": "coding"},
    }
    assert latest_tenant["document"] == {"profile": "coding", "deny": ["tts", "exec"]}
    assert page["results"][2]["note"] == "no shell"
    assert page["results"][2]["diff"] == {"deny": {"added": ["exec"], "removed": []}}
    assert latest_tenant["author"] == {"kind": "api_key", "id": me["id"], "label": me["label"]}
    assert set(latest_tenant) == {
        "id", "scope", "agent", "channel", "chat_id", "number", "document", "diff", "note", "author",
        "created_at",
    }  # fmt: skip

    detail = viewer_a.get(f"{VERSIONS}{latest_tenant['id']}/")
    assert detail.json() == latest_tenant
    agent_only = viewer_a.get(f"{VERSIONS}?scope=agent&agent=bot").json()["results"]
    assert [v["number"] for v in agent_only] == [1]
    assert viewer_a.get(f"{VERSIONS}?agent=other").json()["results"] == []
    _error(viewer_a.get(f"{VERSIONS}?scope=planet"), 400, "invalid")
    _error(viewer_a.get(f"{VERSIONS}?colour=red"), 400, "invalid")
    _error(viewer_a.get(f"{VERSIONS}00000000-0000-0000-0000-000000000000/"), 404, "not_found")


def test_version_filters_by_channel_and_chat(admin_a, viewer_a):
    admin_a.put("/api/v1/policy/channels/tg/", {"document": {"allow": ["tts"]}}, format="json")
    admin_a.put("/api/v1/policy/channels/tg/?chat_id=5", {"document": {"allow": ["datetime"]}}, format="json")
    admin_a.put("/api/v1/policy/channels/irc/", {"document": {"allow": ["datetime"]}}, format="json")
    rows = viewer_a.get(f"{VERSIONS}?channel=tg").json()["results"]
    assert sorted((v["channel"], v["chat_id"]) for v in rows) == [("tg", ""), ("tg", "5")]
    rows = viewer_a.get(f"{VERSIONS}?channel=tg&chat_id=5").json()["results"]
    assert [(v["channel"], v["chat_id"], v["document"]) for v in rows] == [
        ("tg", "5", {"allow": ["datetime"]})
    ]


def test_version_list_is_cursor_paginated_and_bounded_in_queries(
    admin_a, viewer_a, django_assert_max_num_queries
):
    for n in range(7):
        admin_a.put(TENANT, {"document": {"rate_limit_per_hour": n + 1}}, format="json")
    with django_assert_max_num_queries(4):
        first = viewer_a.get(f"{VERSIONS}?page_size=3").json()
    assert [v["number"] for v in first["results"]] == [7, 6, 5]
    assert "cursor=" in first["next"]
    second = viewer_a.get(first["next"]).json()
    assert [v["number"] for v in second["results"]] == [4, 3, 2]
    with django_assert_max_num_queries(4):
        assert len(viewer_a.get("/api/v1/policy/channels/").json()) == 0


def test_rollback_restores_as_a_new_version_audited(admin_a, viewer_a, tenant_a, bot):
    v1 = admin_a.put(TENANT, {"document": {"deny": ["exec"]}}, format="json").json()
    admin_a.put(TENANT, {"document": {"deny": ["exec", "tts"], "profile": "coding"}}, format="json")
    first = viewer_a.get(f"{VERSIONS}?scope=tenant").json()["results"][-1]
    assert first["number"] == v1["version"] == 1
    url = f"{VERSIONS}{first['id']}/rollback"

    preview = viewer_a.get(url).json()
    assert preview["diff"] == {
        "deny": {"added": [], "removed": ["tts"]},
        "profile": {"from": "coding", "to": None},
    }
    assert (preview["changed"], preview["restorable"], preview["current_version"]) == (True, True, 2)
    assert preview["version"]["id"] == first["id"]

    config = _config_version(tenant_a)
    restored = admin_a.post(url)
    assert restored.status_code == 200, restored.content
    assert restored.json() | {"updated_at": None} == {
        "scope": "tenant",
        "agent": None,
        "channel": None,
        "chat_id": None,
        "document": {"deny": ["exec"]},
        "version": 3,
        "changed": True,
        "warnings": [],
        "updated_at": None,
    }
    assert _config_version(tenant_a) > config
    top = viewer_a.get(VERSIONS).json()["results"][0]
    assert (top["number"], top["note"], top["document"]) == (3, "rollback to v1", {"deny": ["exec"]})
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="policy.updated").order_by("-created_at")[0]
    assert (event.data["note"], event.data["version"]) == ("rollback to v1", 3)
    assert "tts" in _listed(viewer_a)

    again = admin_a.post(url).json()
    assert (again["changed"], again["version"]) == (False, 3)
    assert viewer_a.get(url).json()["changed"] is False


def test_rollback_to_a_deletion_deletes_and_to_a_deleted_agent_is_409(admin_a, viewer_a, tenant_a, bot):
    admin_a.put(AGENT, {"document": {"deny": ["exec"]}}, format="json")
    admin_a.delete(AGENT)
    admin_a.put(AGENT, {"document": {"deny": ["tts"]}}, format="json")
    versions = viewer_a.get(f"{VERSIONS}?agent=bot").json()["results"]
    assert [(v["number"], v["note"]) for v in versions] == [(3, ""), (2, "deleted"), (1, "")]

    deletion = admin_a.post(f"{VERSIONS}{versions[1]['id']}/rollback").json()
    assert (deletion["changed"], deletion["document"], deletion["version"]) == (True, {}, 0)
    assert admin_a.get(AGENT).json()["version"] == 0
    assert PolicyDocument.objects.for_tenant(tenant_a).count() == 0

    services.agent_delete(actor=Actor.system(tenant_a), agent=bot)
    before = tenant_state(tenant_a)
    url = f"{VERSIONS}{versions[2]['id']}/rollback"
    error = _error(admin_a.post(url), 409, "conflict")
    assert error["message"] == "Agent 'bot' no longer exists; its policy cannot be restored."
    assert tenant_state(tenant_a) == before
    preview = viewer_a.get(url).json()
    assert (preview["restorable"], preview["reason"]) == (False, error["message"])
    # the history of a deleted agent's policy stays readable
    assert [v["number"] for v in viewer_a.get(f"{VERSIONS}?agent=bot").json()["results"]] == [4, 3, 2, 1]


# --- explain -----------------------------------------------------------------------------------------------


@pytest.fixture
def layered(admin_a, bot):
    """A tenant, agent and channel policy that each decide something."""
    tenant_doc = {
        "profile": "coding",
        "byProvider": {"openai": {"profile": "minimal"}},
        "deny": ["exec"],
        "alsoAllow": ["datetime"],
    }
    assert admin_a.put(TENANT, {"document": tenant_doc}, format="json").status_code == 200
    assert admin_a.put(AGENT, {"document": {"deny": ["web_fetch"]}}, format="json").status_code == 200
    channel_doc = {"allow": ["group:web", "group:fs", "datetime", "session_status"]}
    response = admin_a.put("/api/v1/policy/channels/telegram/", {"document": channel_doc}, format="json")
    assert response.status_code == 200
    return tenant_doc


CODING_MINUS = ["credentialed_exec", "edit", "glob", "knowledge_graph_search", "list_files", "memory_get"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "",
            [
                "create_audio", "create_image", "create_video", "credentialed_exec", "datetime", "edit",
                "glob", "knowledge_graph_search", "list_files", "memory_get", "memory_search",
                "publish_skill", "read_audio", "read_document", "read_file", "read_image", "read_video",
                "search", "session_status", "sessions_history", "sessions_list", "sessions_send",
                "skill_search", "spawn", "tts", "use_skill", "web_search", "write_file",
            ],
        ),
        ("provider=openai", ["datetime", "session_status"]),
        (
            "channel=telegram",
            [
                "datetime", "edit", "glob", "list_files", "read_file", "search", "session_status",
                "web_search", "write_file",
            ],
        ),
        ("channel=telegram&chat_id=9&provider=openai", ["datetime", "session_status"]),
        ("channel=telegram&subagent_depth=1", [
            "datetime", "edit", "glob", "list_files", "read_file", "search", "web_search", "write_file",
        ]),
        ("tool_allow=read_file,datetime,exec,group:web", ["datetime", "read_file", "web_search"]),
        ("tool_allow=,", []),
    ],
)  # fmt: skip
def test_explain_equals_the_listing_for_every_context(viewer_a, layered, query, expected):
    body = viewer_a.get(f"/api/v1/agents/bot/tools/explain?{query}").json()
    assert body["allowed"] == expected
    assert _listed(viewer_a, query=query) == expected
    assert [t["tool"] for t in body["tools"]] == sorted(t["tool"] for t in body["tools"])
    assert len(body["tools"]) == 37
    assert sorted(t["tool"] for t in body["tools"] if t["allowed"]) == expected


def test_explain_names_the_deciding_step_and_the_trail(viewer_a, layered):
    body = viewer_a.get("/api/v1/agents/bot/tools/explain?channel=telegram&chat_id=3").json()
    tools = {t["tool"]: t for t in body["tools"]}
    assert tools["exec"] == {
        "tool": "exec",
        "group": "runtime",
        "allowed": False,
        "decided_by": "channel_allow",
        "trail": [{"step": "channel_allow", "effect": "removed"}],
    }
    everywhere = viewer_a.get("/api/v1/agents/bot/tools/explain").json()
    assert {t["tool"]: t for t in everywhere["tools"]}["exec"]["trail"] == [
        {"step": "deny", "effect": "removed"}
    ]
    assert tools["web_fetch"]["decided_by"] == "agent_deny"
    assert tools["datetime"]["trail"] == [
        {"step": "profile", "effect": "removed"},
        {"step": "also_allow", "effect": "added"},
    ]
    assert tools["datetime"]["allowed"] is True
    assert tools["tts"]["decided_by"] == "channel_allow"
    assert tools["cron"]["decided_by"] == "profile"
    assert tools["cron"]["trail"] == [{"step": "profile", "effect": "removed"}]
    assert tools["read_file"] == {
        "tool": "read_file", "group": "fs", "allowed": True, "decided_by": "profile", "trail": [],
    }  # fmt: skip
    assert tools["workspace_dir"]["group"] is None
    assert body["context"] == {
        "provider": "",
        "user_id": "",
        "channel": "telegram",
        "chat_id": "3",
        "subagent_depth": 0,
        "tool_allow": None,
    }
    assert body["documents"] == {
        "tenant": layered,
        "agent": {"deny": ["web_fetch"]},
        "channel": {"allow": ["group:web", "group:fs", "datetime", "session_status"]},
        "channel_key": {"channel": "telegram", "chat_id": ""},
    }
    plain = viewer_a.get("/api/v1/agents/bot/tools/explain?provider=openai&tool_allow=datetime").json()
    assert plain["documents"]["channel"] is None
    assert plain["documents"]["channel_key"] is None
    assert plain["context"]["tool_allow"] == ["datetime"]
    session = {t["tool"]: t for t in plain["tools"]}["session_status"]
    assert session["decided_by"] == "request_allow"
    assert {t["tool"]: t for t in plain["tools"]}["read_file"]["decided_by"] == "provider_profile"


def test_explain_input_errors(viewer_a, outsider, bot):
    _error(viewer_a.get("/api/v1/agents/bot/tools/explain?subagent_depth=9"), 400, "invalid")
    _error(viewer_a.get("/api/v1/agents/bot/tools/explain?format=openai"), 400, "invalid")
    _error(viewer_a.get("/api/v1/agents/ghost/tools/explain"), 404, "not_found")
    _error(outsider.get("/api/v1/agents/bot/tools/explain"), 404, "not_found")


# --- preview ---------------------------------------------------------------------------------------------


def test_preview_shows_what_a_draft_adds_and_removes_and_saves_nothing(member_a, admin_a, tenant_a, bot):
    admin_a.put(TENANT, {"document": {"profile": "messaging"}}, format="json")
    before = tenant_state(tenant_a)
    allowed_now = _listed(member_a)

    tenant_draft = member_a.post(
        PREVIEW,
        {
            "scope": "tenant",
            "explain_agent": "bot",
            "document": {"profile": "messaging", "deny": ["group:web"]},
        },
        format="json",
    ).json()
    assert tenant_draft["valid"] is True
    assert tenant_draft["allowed_before"] == allowed_now
    assert tenant_draft["removed"] == ["web_fetch", "web_search"]
    assert tenant_draft["added"] == []
    assert tenant_draft["allowed_after"] == sorted(set(allowed_now) - {"web_fetch", "web_search"})
    assert {t["tool"]: t["decided_by"] for t in tenant_draft["tools"]}["web_fetch"] == "deny"

    agent_draft = member_a.post(
        PREVIEW,
        {"scope": "agent", "agent": "bot", "document": {"alsoAllow": ["exec", "mcp_x__*"]}},
        format="json",
    ).json()
    assert (agent_draft["added"], agent_draft["removed"]) == (["exec"], [])
    assert agent_draft["warnings"] == ["alsoAllow[1]: the pattern 'mcp_x__*' matches no tool today."]

    channel_draft = member_a.post(
        PREVIEW,
        {
            "scope": "channel",
            "channel": "telegram",
            "chat_id": "12",
            "explain_agent": "bot",
            "document": {"allow": ["web_search", "tts"]},
            "context": {"provider": "openai"},
        },
        format="json",
    ).json()
    assert channel_draft["allowed_after"] == ["web_search"]  # tts is outside the messaging profile

    provider_draft = member_a.post(
        PREVIEW,
        {
            "scope": "tenant",
            "explain_agent": "bot",
            "document": {"profile": "messaging", "byProvider": {"openai": {"profile": "minimal"}}},
            "context": {"provider": "openai", "tool_allow": ["session_status", "web_search"]},
        },
        format="json",
    ).json()
    assert provider_draft["allowed_before"] == ["session_status", "web_search"]
    assert provider_draft["allowed_after"] == ["session_status"]
    assert tenant_state(tenant_a) == before


def test_preview_of_an_invalid_draft_is_200_with_errors(member_a, tenant_a, bot):
    before = tenant_state(tenant_a)
    response = member_a.post(
        PREVIEW, {"scope": "agent", "agent": "bot", "document": {"deny": ["bash", "web_fetc"]}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    assert body["errors"] == {
        "deny[0]": ["'bash' is an alias; policies name tools: use 'exec'."],
        "deny[1]": ["Unknown tool 'web_fetc'; did you mean web_fetch, web_search?"],
    }
    assert body["allowed_after"] == body["allowed_before"] == _listed(member_a)
    assert (body["added"], body["removed"]) == ([], [])
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"document": {}}, 400, "scope"),
        ({"scope": "tenant", "explain_agent": "bot"}, 400, "document"),
        ({"scope": "tenant", "document": {}}, 400, "explain_agent"),
        ({"scope": "agent", "document": {}}, 400, "agent"),
        ({"scope": "tenant", "agent": "bot", "document": {}, "explain_agent": "bot"}, 400, "agent"),
        ({"scope": "agent", "agent": "bot", "explain_agent": "other", "document": {}}, 400, "explain_agent"),
        ({"scope": "tenant", "channel": "tg", "explain_agent": "bot", "document": {}}, 400, "channel"),
        ({"scope": "channel", "explain_agent": "bot", "document": {}}, 400, None),
        (
            {
                "scope": "channel",
                "channel": "tg",
                "explain_agent": "bot",
                "document": {},
                "context": {"channel": "x"},
            },
            400,
            "context",
        ),
        (
            {"scope": "tenant", "explain_agent": "bot", "document": {}, "context": {"subagent_depth": 9}},
            400,
            "context",
        ),
        (
            {"scope": "tenant", "explain_agent": "bot", "document": {}, "context": {"colour": 1}},
            400,
            "context",
        ),
        ({"scope": "tenant", "explain_agent": "bot", "document": {}, "tool": "x"}, 400, "tool"),
        ({"scope": "planet", "explain_agent": "bot", "document": {}}, 400, "scope"),
        ({"scope": "tenant", "explain_agent": "ghost", "document": {}}, 404, None),
        ({"scope": "agent", "agent": "ghost", "document": {}}, 404, None),
    ],
)
def test_malformed_previews(member_a, tenant_a, bot, body, status, field):
    before = tenant_state(tenant_a)
    response = member_a.post(PREVIEW, body, format="json")
    error = _error(response, status, "invalid" if status == 400 else "not_found")
    if field:
        assert field in error["details"], error
    assert tenant_state(tenant_a) == before


# --- export and import ------------------------------------------------------------------------------------


def _set_up_everything(admin_a) -> None:
    admin_a.put(
        TENANT,
        {"document": {"profile": "coding", "deny": ["exec"], "rate_limit_per_hour": 10}},
        format="json",
    )
    admin_a.put(AGENT, {"document": {"alsoAllow": ["exec"]}}, format="json")
    admin_a.put("/api/v1/policy/channels/tg/", {"document": {"allow": ["group:web"]}}, format="json")
    admin_a.put("/api/v1/policy/channels/tg/?chat_id=1", {"document": {"allow": ["tts"]}}, format="json")


def test_export_then_import_round_trips(admin_a, viewer_a, tenant_a, bot):
    _set_up_everything(admin_a)
    exported = viewer_a.get(EXPORT).json()
    assert exported == {
        "format": 1,
        "tenant": {"profile": "coding", "deny": ["exec"], "rate_limit_per_hour": 10},
        "agents": {"bot": {"alsoAllow": ["exec"]}},
        "channels": [
            {"channel": "tg", "chat_id": "", "allow": ["group:web"]},
            {"channel": "tg", "chat_id": "1", "allow": ["tts"]},
        ],
    }
    # unchanged: nothing to do
    assert admin_a.put(EXPORT, exported, format="json").json() == {"changed": [], "warnings": []}

    admin_a.delete(AGENT)
    admin_a.put(TENANT, {"document": {"profile": "minimal"}}, format="json")
    admin_a.delete("/api/v1/policy/channels/tg/?chat_id=1")
    config = _config_version(tenant_a)
    imported = admin_a.put(EXPORT, exported, format="json")
    assert imported.status_code == 200, imported.content
    assert sorted(imported.json()["changed"]) == ["agent bot", "channel tg chat 1", "tenant"]
    assert viewer_a.get(EXPORT).json() == exported
    assert _config_version(tenant_a) > config
    notes = [v["note"] for v in viewer_a.get(VERSIONS).json()["results"][:3]]
    assert notes == ["import", "import", "import"]
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="policy.imported").count() == 2


def test_import_is_atomic_and_reports_every_error(admin_a, tenant_a, bot):
    _set_up_everything(admin_a)
    before = tenant_state(tenant_a)
    bundle = {
        "format": 1,
        "tenant": {"allow": ["read_fil"]},
        "agents": {"bot": {"deny": ["bash"]}, "ghost": {"deny": ["exec"]}},
        "channels": [
            {"channel": "tg", "allow": ["datetime"]},
            {"chat_id": "x"},
            {"channel": "tg", "allow": []},
        ],
        "extra": True,
    }
    error = _error(admin_a.put(EXPORT, bundle, format="json"), 400, "invalid")
    assert error["details"] == {
        "document": ["Unknown keys: extra; use format, tenant, agents and channels."],
        "tenant.allow[0]": ["Unknown tool 'read_fil'; did you mean read_file, write_file, read_video?"],
        "agents.bot.deny[0]": ["'bash' is an alias; policies name tools: use 'exec'."],
        "agents.ghost": ["No agent with this key in this tenant."],
        "channels[1]": ['Must be an object with "channel" (and optionally "chat_id").'],
        "channels[2]": ["This channel and chat appear twice."],
    }
    assert tenant_state(tenant_a) == before

    one_bad_agent = {"format": 1, "tenant": {"deny": ["tts"]}, "agents": {"ghost": {}}, "channels": []}
    error = _error(admin_a.put(EXPORT, one_bad_agent, format="json"), 400, "invalid")
    assert error["message"] == "agents.ghost: No agent with this key in this tenant."
    assert tenant_state(tenant_a) == before

    error = _error(admin_a.put(EXPORT), 400, "invalid")
    assert error["message"] == "The body must be the whole policy, as GET /api/v1/policy/export returns it."
    hostile: list[Any] = [
        [1],
        {"format": 2},
        {"format": True},
        {"agents": []},
        {"channels": {}},
        {"tenant": []},
    ]
    for bundle in hostile:
        _error(admin_a.put(EXPORT, bundle, format="json"), 400, "invalid")
    assert tenant_state(tenant_a) == before


def test_import_deletes_scopes_absent_from_the_bundle(admin_a, viewer_a, tenant_a, bot):
    _set_up_everything(admin_a)
    result = admin_a.put(
        EXPORT,
        {"format": 1, "tenant": {"profile": "coding", "deny": ["exec"], "rate_limit_per_hour": 10}},
        format="json",
    ).json()
    assert sorted(result["changed"]) == ["agent bot", "channel tg", "channel tg chat 1"]
    assert viewer_a.get("/api/v1/policy/channels/").json() == []
    assert viewer_a.get(AGENT).json()["version"] == 0
    deleted = viewer_a.get(f"{VERSIONS}?scope=agent").json()["results"][0]
    assert (deleted["document"], deleted["note"]) == (None, "import")
    assert "exec" not in _listed(viewer_a)


def test_import_reports_warnings_of_ignored_keys(admin_a, bot):
    bundle = {"format": 1, "tenant": GOCLAW_TOOLS, "agents": {"bot": GOCLAW_AGENT}}
    result = admin_a.put(EXPORT, bundle, format="json").json()
    assert sorted(result["changed"]) == ["agent bot", "tenant"]
    assert "tenant: browser is ignored: there is no browser tool." in result["warnings"]
    assert any(w.startswith("agents.bot: toolCallPrefix is ignored") for w in result["warnings"])


# --- every write: audited, published, config_version raised, seen by the next call -----------------------


@pytest.fixture
def policy_events(tenant_a):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "policy"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [layer.deserialize(bytes(row))["event"] for row in rows]

    return read


WRITES = [
    ("put", TENANT, {"document": {"deny": ["tts"]}}, 200, "policy.updated"),
    ("delete", TENANT, None, 204, "policy.deleted"),
    ("put", AGENT, {"document": {"deny": ["datetime"]}}, 200, "policy.updated"),
    ("delete", AGENT, None, 204, "policy.deleted"),
    ("put", "/api/v1/policy/channels/tg/", {"document": {"allow": ["datetime"]}}, 200, "policy.updated"),
    ("delete", "/api/v1/policy/channels/tg/", None, 204, "policy.deleted"),
    ("post", "rollback", None, 200, "policy.updated"),
    ("put", EXPORT, {"format": 1, "tenant": {"deny": ["cron"]}}, 200, "policy.imported"),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "verb"), WRITES, ids=[f"{w[0]} {w[1]}" for w in WRITES]
)
def test_every_write_is_audited_published_and_raises_config_version(
    admin_a, tenant_a, bot, policy_events, method, url, body, status, verb
):
    system = Actor.system(tenant_a)
    from apps.policy import services as policy

    first = policy.policy_save(system, policy.target("tenant"), {"deny": ["exec"]})
    policy.policy_save(system, policy.target("tenant"), {"deny": ["exec", "cron"]})
    policy.policy_save(system, policy.target("agent", agent=bot), {"deny": ["exec"]})
    policy.policy_save(system, policy.target("channel", channel="tg"), {"allow": ["tts"]})
    if url == "rollback":
        assert first.version is not None
        url = f"{VERSIONS}{first.version.pk}/rollback"
    audits, config, published = (
        AuditEvent.objects.for_tenant(tenant_a).count(),
        _config_version(tenant_a),
        len(policy_events()),
    )

    response = getattr(admin_a, method)(url, body, format="json")

    assert response.status_code == status, response.content
    new_events = AuditEvent.objects.for_tenant(tenant_a).order_by("created_at")[audits:]
    assert verb in [e.verb for e in new_events]
    assert all(e.actor_kind == "api_key" for e in new_events)
    assert _config_version(tenant_a) > config
    live = policy_events()[published:]
    assert live
    assert live[0]["topic"] == "policy"
    assert live[0]["type"] in {"policy.updated", "policy.deleted"}
    assert live[0]["tenant"] == tenant_a.slug


def test_execute_sees_a_saved_change_on_the_very_next_call(admin_a, member_a, bot):
    assert _execute(member_a, "datetime")["is_error"] is False
    admin_a.put(TENANT, {"document": {"deny": ["datetime"]}}, format="json")
    denied = _execute(member_a, "datetime")
    assert (denied["is_error"], denied["for_llm"]) == (True, "tool not allowed by policy: datetime")
    admin_a.delete(TENANT)
    assert _execute(member_a, "datetime")["is_error"] is False

    admin_a.put("/api/v1/policy/channels/tg/", {"document": {"allow": ["tts"]}}, format="json")
    on_tg = _execute(member_a, "datetime", channel="tg")
    assert on_tg["for_llm"] == "tool not allowed by policy: datetime"
    assert _execute(member_a, "datetime", channel="irc")["is_error"] is False

    admin_a.put(AGENT, {"document": {"alsoAllow": ["datetime"]}, "note": "back"}, format="json")
    assert _execute(member_a, "datetime", channel="tg")["is_error"] is False  # alsoAllow comes last
    admin_a.put(AGENT, {"document": {"deny": ["datetime"]}}, format="json")
    assert _execute(member_a, "datetime")["for_llm"] == "tool not allowed by policy: datetime"

    first = PolicyVersion.objects.for_tenant(bot.tenant).get(agent_key="bot", number=1)
    admin_a.post(f"{VERSIONS}{first.pk}/rollback")
    assert _execute(member_a, "datetime", channel="tg")["is_error"] is False
    admin_a.put(EXPORT, {"format": 1, "agents": {"bot": {"deny": ["datetime"]}}}, format="json")
    assert _execute(member_a, "datetime", channel="irc")["for_llm"] == "tool not allowed by policy: datetime"


def test_updated_at_is_iso_and_moves(admin_a):
    first = admin_a.put(TENANT, {"document": {"deny": ["tts"]}}, format="json").json()["updated_at"]
    second = admin_a.put(TENANT, {"document": {"deny": ["cron"]}}, format="json").json()["updated_at"]
    assert re.match(r"\d{4}-\d\d-\d\dT", first)
    assert second > first
