"""The custom tools REST API: definition, validation (400 by field, nothing changed), names kept for
built-in, alias, domain and MCP tools (409), scopes, write-only env, audit and live events without
secrets, list filters and query bounds, and the test run with its decision path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent, ToolCall
from apps.custom_tools.models import CustomTool
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServerTool
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for
from tests.api.personas import error
from tests.api.tenant_state import tenant_state
from tests.custom_tools.support import DNS_LOOKUP, SECRET, TOOLS, ok

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    """What was delivered on tenant A's ``custom_tools`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "custom_tools"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def _nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        inner = {"type": "array", "items": inner}
    return inner


def audit(tenant: Tenant) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.for_tenant(tenant).filter(verb__startswith="custom_tool.").order_by("created_at")
    )


def test_define_read_change_and_delete_without_showing_env_values(
    admin_a, viewer_a, tenant_a, agent, published
):
    created = ok(admin_a.post(TOOLS, {**DNS_LOOKUP, "env": {"API_TOKEN": SECRET}}, format="json"), 201)
    assert created["env"] == ["API_TOKEN"]
    assert created["agent"] is None
    assert created["working_dir"] == ""
    assert created["created_by"].startswith("key ")
    assert set(created) == {
        "id", "name", "description", "scope", "agent", "parameters", "command", "working_dir",
        "timeout_seconds", "env", "enabled", "created_by", "created_at", "updated_at",
    }  # fmt: skip

    read = ok(viewer_a.get(f"{TOOLS}{created['id']}/"))
    assert read == created
    listed = ok(viewer_a.get(TOOLS))
    assert [t["name"] for t in listed["results"]] == ["dns_lookup"]

    changed = ok(
        admin_a.patch(
            f"{TOOLS}{created['id']}/",
            {"env": {"OTHER": SECRET + "-2"}, "timeout_seconds": 20, "agent": "bot"},
            format="json",
        )
    )
    assert (changed["env"], changed["timeout_seconds"], changed["scope"], changed["agent"]) == (
        ["OTHER"],
        20,
        "agent",
        "bot",
    )
    unchanged = ok(admin_a.patch(f"{TOOLS}{created['id']}/", {"timeout_seconds": 20}, format="json"))
    assert unchanged["updated_at"] == changed["updated_at"]
    assert ok(admin_a.delete(f"{TOOLS}{created['id']}/"), 204) is None
    error(viewer_a.get(f"{TOOLS}{created['id']}/"), 404, "not_found")

    verbs = [e.verb for e in audit(tenant_a)]
    assert verbs == ["custom_tool.created", "custom_tool.updated", "custom_tool.deleted"]
    assert audit(tenant_a)[1].data["changed"] == ["agent", "env", "timeout_seconds"]
    assert audit(tenant_a)[0].data["env"] == ["API_TOKEN"]
    assert [e["type"] for e in published()] == verbs
    shown = json.dumps([created, read, listed, changed, [e.data for e in audit(tenant_a)], published()])
    assert SECRET not in shown


def test_every_change_raises_the_configuration_version(admin_a, tenant_a):
    versions = [tenant_a.config_version]

    def version() -> int:
        tenant_a.refresh_from_db()
        return tenant_a.config_version

    created = ok(admin_a.post(TOOLS, DNS_LOOKUP, format="json"), 201)
    versions.append(version())
    ok(admin_a.patch(f"{TOOLS}{created['id']}/", {"enabled": False}, format="json"))
    versions.append(version())
    ok(admin_a.delete(f"{TOOLS}{created['id']}/"), 204)
    versions.append(version())
    assert versions == sorted(set(versions))


def test_a_command_template_with_a_secret_in_it_is_shown_masked(admin_a, tenant_a):
    body = {"name": "call_api", "command": f"curl -s -H 'X-Key: {SECRET}' https://example.com"}
    created = ok(admin_a.post(TOOLS, {**body, "env": {"API_TOKEN": SECRET}}, format="json"), 201)
    assert SECRET not in json.dumps(created)
    assert "[REDACTED]" in created["command"]
    assert SECRET not in json.dumps([e.data for e in audit(tenant_a)])


@pytest.mark.parametrize(
    "name",
    ["exec", "read_file", "web_fetch", "credentialed_exec", "bash", "edit_file", "file", "shell", "web"],
)
def test_a_built_in_tools_name_is_409_and_changes_nothing(name, admin_a, tenant_a):
    before = tenant_state(tenant_a)
    refused = error(
        admin_a.post(TOOLS, {"name": name, "command": "echo hi"}, format="json"), 409, "name_reserved"
    )
    assert refused["message"].startswith(f"name: '{name}' is ")
    assert tenant_state(tenant_a) == before


def test_an_mcp_tools_name_is_409(admin_a, tenant_a):
    server = mcp_services.server_create(
        actor=Actor.system(tenant_a), name="pg", transport="stdio", command="npx"
    )
    MCPServerTool.objects.create(tenant=tenant_a, server=server, name="query")
    before = tenant_state(tenant_a)
    for name in ("mcp_pg__query", "mcp_other__anything"):
        refused = error(
            admin_a.post(TOOLS, {"name": name, "command": "echo hi"}, format="json"), 409, "name_reserved"
        )
        assert "MCP tool" in refused["message"]
    assert tenant_state(tenant_a) == before


def test_renaming_to_a_built_in_name_is_409(admin_a, tenant_a):
    created = ok(admin_a.post(TOOLS, DNS_LOOKUP, format="json"), 201)
    before = tenant_state(tenant_a)
    error(admin_a.patch(f"{TOOLS}{created['id']}/", {"name": "exec"}, format="json"), 409, "name_reserved")
    assert tenant_state(tenant_a) == before


def test_one_name_per_scope_a_global_and_per_agent_ones_side_by_side(admin_a, tenant_a, agent):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    ok(admin_a.post(TOOLS, DNS_LOOKUP, format="json"), 201)
    ok(admin_a.post(TOOLS, {**DNS_LOOKUP, "agent": "bot"}, format="json"), 201)
    ok(admin_a.post(TOOLS, {**DNS_LOOKUP, "agent": "other"}, format="json"), 201)
    before = tenant_state(tenant_a)
    error(admin_a.post(TOOLS, DNS_LOOKUP, format="json"), 409, "duplicate_custom_tool")
    refused = error(
        admin_a.post(TOOLS, {**DNS_LOOKUP, "agent": "bot"}, format="json"), 409, "duplicate_custom_tool"
    )
    assert "for the agent 'bot'" in refused["message"]
    assert tenant_state(tenant_a) == before

    mine = ok(admin_a.get(TOOLS + "?agent=bot"))["results"]
    assert [(t["name"], t["agent"]) for t in mine] == [("dns_lookup", "bot")]
    global_only = ok(admin_a.get(TOOLS + "?scope=global"))["results"]
    assert [t["agent"] for t in global_only] == [None]
    assert len(ok(admin_a.get(TOOLS + "?scope=agent"))["results"]) == 2
    error(admin_a.get(TOOLS + "?agent=nobody"), 400, "invalid")
    error(admin_a.get(TOOLS + "?scope=everywhere"), 400, "invalid")
    moved = error(
        admin_a.patch(f"{TOOLS}{mine[0]['id']}/", {"agent": "other"}, format="json"),
        409,
        "duplicate_custom_tool",
    )
    assert "'other'" in moved["message"]


def test_deleting_an_agent_deletes_its_own_tools(admin_a, tenant_a, agent):
    ok(admin_a.post(TOOLS, {**DNS_LOOKUP, "agent": "bot"}, format="json"), 201)
    ok(admin_a.delete("/api/v1/agents/bot/"), 204)
    assert not CustomTool.objects.for_tenant(tenant_a).exists()


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"name": "Bad-Name"}, "name", "lower-case letter"),
        ({"name": "9lives"}, "name", "lower-case letter"),
        ({"name": "a" * 65}, "name", "1 to 64"),
        ({"name": ""}, "name", "may not be blank"),
        ({"name": 5}, "name", "string"),
        ({"command": ""}, "command", "may not be empty"),
        ({"command": "   "}, "command", "may not be empty"),
        ({"command": "x" * 8193}, "command", "at most 8192"),
        ({"command": "echo \x00"}, "command", "Null characters"),
        ({"command": "echo {{.nope}}"}, "command", "names no parameter"),
        ({"parameters": {"type": "string"}}, "parameters", '"type": "object"'),
        ({"parameters": []}, "parameters", "JSON Schema object"),
        ({"parameters": {"type": "object", "properties": {"a": {"type": "strang"}}}}, "parameters", "valid"),
        ({"parameters": {"type": "object", "properties": 3}}, "parameters", "valid JSON Schema"),
        ({"parameters": {"type": "object", "required": ["ghost"]}}, "parameters", "'ghost'"),
        (
            {"parameters": {"type": "object", "properties": {"a b": {"type": "string"}}}},
            "parameters",
            "property names",
        ),
        (
            {"parameters": {"type": "object", "properties": {"a": {"$ref": "https://evil.test/s.json"}}}},
            "parameters",
            "references inside the schema",
        ),
        (
            {"parameters": {"type": "object", "description": "x" * 70000}},
            "parameters",
            "at most 65536 bytes",
        ),
        (
            {"parameters": {"type": "object", "properties": {"a": _nested(40)}}},
            "parameters",
            "more than 32 levels deep",
        ),
        ({"working_dir": "/etc"}, "working_dir", "relative"),
        ({"working_dir": "~/x"}, "working_dir", "relative"),
        ({"working_dir": "../../other"}, "working_dir", "inside the agent's workspace"),
        ({"working_dir": "a/../../b"}, "working_dir", "inside the agent's workspace"),
        ({"working_dir": "a\nb"}, "working_dir", "control characters"),
        ({"timeout_seconds": 0}, "timeout_seconds", "between 1 and 600"),
        ({"timeout_seconds": 601}, "timeout_seconds", "between 1 and 600"),
        ({"timeout_seconds": "30"}, "timeout_seconds", "whole number"),
        ({"timeout_seconds": True}, "timeout_seconds", "whole number"),
        ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, "env", "cannot be set"),
        ({"env": {"BASH_ENV": "/tmp/x"}}, "env", "cannot be set"),
        ({"env": {"DYLD_X": "1"}}, "env", "cannot be set"),
        ({"env": {"1BAD": "1"}}, "env", "not a variable name"),
        ({"env": {"A": 1}}, "env", "must be a string"),
        ({"env": {"A": "x" * 16385}}, "env", "longer than"),
        ({"env": {f"V{i}": "v" for i in range(65)}}, "env", "at most 64"),
        ({"env": "A=1"}, "env", "object"),
        ({"description": "d" * 4001}, "description", "at most 4000"),
        ({"enabled": "yes"}, "enabled", "true or false"),
        ({"agent": "nobody"}, "agent", "no agent 'nobody'"),
        ({"surprise": 1}, "surprise", "Unknown field"),
    ],
)
def test_refused_definitions_are_400_by_field_and_change_nothing(admin_a, tenant_a, body, field, fragment):
    before = tenant_state(tenant_a)
    base = {"name": "probe", "command": "echo hi"}
    refused = error(admin_a.post(TOOLS, {**base, **body}, format="json"), 400, "invalid")
    assert fragment in " ".join(refused["details"][field]), refused
    assert tenant_state(tenant_a) == before


def test_a_change_is_validated_as_a_whole(admin_a, tenant_a):
    created = ok(admin_a.post(TOOLS, DNS_LOOKUP, format="json"), 201)
    before = tenant_state(tenant_a)
    # dropping the parameter the command uses
    refused = error(
        admin_a.patch(f"{TOOLS}{created['id']}/", {"parameters": {"type": "object"}}, format="json"),
        400,
        "invalid",
    )
    assert "{{.domain}}" in refused["details"]["command"][0]
    error(admin_a.patch(f"{TOOLS}{created['id']}/", {"name": "Nope"}, format="json"), 400, "invalid")
    assert tenant_state(tenant_a) == before


def test_the_list_pages_and_stays_within_a_query_bound(
    admin_a, tenant_a, agent, django_assert_max_num_queries
):
    for i in range(30):
        ok(
            admin_a.post(TOOLS, {"name": f"tool_{i:02d}", "command": "echo", "agent": "bot"}, format="json"),
            201,
        )
    with django_assert_max_num_queries(8):
        page = ok(admin_a.get(TOOLS + "?page_size=20"))
    assert page["count"] == 30
    assert len(page["results"]) == 20
    assert page["results"][0]["name"] == "tool_00"
    assert ok(admin_a.get(TOOLS + "?page=2&page_size=20"))["results"][-1]["name"] == "tool_29"


# --- the test run -------------------------------------------------------------------------------------


def test_a_test_run_answers_output_masked_command_and_the_decision_path(admin_a, tenant_a, agent, published):
    created = ok(
        admin_a.post(
            TOOLS,
            {
                **DNS_LOOKUP,
                "command": f'getent hosts {{{{.domain}}}} && echo "$API_TOKEN" && echo {SECRET}',
                "env": {"API_TOKEN": SECRET},
                "enabled": False,
            },
            format="json",
        ),
        201,
    )

    answer = ok(
        admin_a.post(
            f"{TOOLS}{created['id']}/test", {"agent": "bot", "args": {"domain": "localhost"}}, format="json"
        )
    )

    assert answer["ok"] is True, answer
    assert (answer["tool"], answer["agent"], answer["exit_code"], answer["timed_out"]) == (
        "dns_lookup",
        "bot",
        0,
        False,
    )
    assert answer["rendered_command"] == (
        "getent hosts 'localhost' && echo \"$API_TOKEN\" && echo [REDACTED]"
    )
    assert "localhost" in answer["output"]
    assert answer["output"].splitlines()[-2:] == ["[REDACTED]", "[REDACTED]"]
    assert [(s["step"], s["ok"]) for s in answer["steps"]] == [
        ("schema", True),
        ("render", True),
        ("working_dir", True),
        ("safeguard", True),
        ("deny_groups", True),
        ("run", True),
    ]
    assert answer["stopped_at"] is None
    assert SECRET not in json.dumps(answer)
    tested = audit(tenant_a)[-1]
    assert tested.verb == "custom_tool.tested"
    assert tested.data["arguments"] == ["domain"]
    assert tested.data["ok"] is True
    assert SECRET not in json.dumps(tested.data)
    assert published()[-1]["type"] == "custom_tool.tested"
    assert not ToolCall.objects.for_tenant(tenant_a).exists()  # a test run is not an agent's call


def test_a_test_run_stops_at_the_step_that_refuses(admin_a, tenant_a, agent):
    created = ok(admin_a.post(TOOLS, {**DNS_LOOKUP, "name": "lookup"}, format="json"), 201)
    url = f"{TOOLS}{created['id']}/test"

    bad_args = ok(admin_a.post(url, {"agent": "bot", "args": {"domain": 5}}, format="json"))
    assert (bad_args["ok"], bad_args["stopped_at"], bad_args["rendered_command"]) == (False, "schema", "")
    assert "Invalid arguments for lookup" in bad_args["output"]

    denied = ok(admin_a.post(url, {"agent": "bot", "args": {"domain": "sudo.example"}}, format="json"))
    assert denied["stopped_at"] == "deny_groups"
    assert denied["rendered_command"] == "getent hosts 'sudo.example'"
    assert [s["step"] for s in denied["steps"]] == [
        "schema",
        "render",
        "working_dir",
        "safeguard",
        "deny_groups",
    ]
    assert "deny group privilege_escalation" in denied["steps"][-1]["detail"]
    assert denied["exit_code"] is None

    failed = ok(
        admin_a.post(url, {"agent": "bot", "args": {"domain": "nothing-here.invalid"}}, format="json")
    )
    assert (failed["ok"], failed["stopped_at"], failed["exit_code"]) == (False, None, 2)
    assert failed["steps"][-1] == {"step": "run", "ok": False, "detail": failed["steps"][-1]["detail"]}
    assert [e.data["stopped_at"] for e in audit(tenant_a)[1:]] == ["schema", "deny_groups", None]


def test_a_test_run_uses_the_agents_workspace(admin_a, tenant_a, agent):
    created = ok(admin_a.post(TOOLS, {"name": "look", "command": "cat note.txt"}, format="json"), 201)
    workspace_for(tenant=tenant_a, agent=agent, user_id="").joinpath("note.txt").write_text("hello")
    answer = ok(admin_a.post(f"{TOOLS}{created['id']}/test", {"agent": "bot"}, format="json"))
    assert answer["output"] == "hello"


def test_a_test_run_needs_the_right_agent(admin_a, tenant_a, agent):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    shared = ok(admin_a.post(TOOLS, {"name": "hello", "command": "echo hi"}, format="json"), 201)
    own = ok(
        admin_a.post(TOOLS, {"name": "hello", "command": "echo mine", "agent": "bot"}, format="json"), 201
    )
    before = tenant_state(tenant_a)

    missing = error(admin_a.post(f"{TOOLS}{shared['id']}/test", {}, format="json"), 400, "invalid")
    assert "required for a global tool" in missing["details"]["agent"][0]
    wrong = error(admin_a.post(f"{TOOLS}{own['id']}/test", {"agent": "other"}, format="json"), 400, "invalid")
    assert "belongs to the agent 'bot'" in wrong["details"]["agent"][0]
    error(admin_a.post(f"{TOOLS}{own['id']}/test", {"agent": "nobody"}, format="json"), 400, "invalid")
    error(admin_a.post(f"{TOOLS}{own['id']}/test", {"args": "x"}, format="json"), 400, "invalid")
    assert tenant_state(tenant_a) == before

    assert ok(admin_a.post(f"{TOOLS}{own['id']}/test", {}, format="json"))["output"] == "mine"
