"""POST /api/v1/runtime/execute: the pipeline through the HTTP API."""

from __future__ import annotations

import json

import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.toolkit import registry
from apps.toolkit.results import ToolResult
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def call(client, tool, args=None, **extra):
    body = {"agent": "bot", "tool": tool, "args": args if args is not None else {}, **extra}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def set_tenant_policy(tenant: Tenant, **values) -> None:
    """Add ``values`` to the tenant's policy document."""
    tenant_target = policy_services.target("tenant")
    saved = policy_services.current(tenant, tenant_target)
    document = {**(saved.document if saved is not None else {}), **values}
    policy_services.policy_save(Actor.system(tenant), tenant_target, document)
    tenant.refresh_from_db()


@pytest.fixture
def fake_datetime(monkeypatch):
    """Replace the datetime implementation for one test (the catalog entry stays the same)."""

    def install(function):
        monkeypatch.setitem(registry._IMPLEMENTATIONS, "datetime", function)

    return install


def test_datetime_runs_and_is_recorded(member_a, agent, tenant_a):
    body = call(
        member_a,
        "datetime",
        {"timezone": "Europe/Paris"},
        context={"session_key": "s-1", "user_id": "u-7", "channel": "web"},
    )
    assert set(body) == {"call_id", "for_llm", "for_user", "is_error", "duration_ms"}
    assert body["is_error"] is False
    assert "ISO 20" in body["for_llm"]
    assert "(UTC+0" in body["for_llm"]
    assert body["duration_ms"] >= 0
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert (row.tool, row.resolved_tool, row.decision, row.status) == (
        "datetime",
        "datetime",
        "allowed",
        "ok",
    )
    assert (row.session_key, row.user_id, row.channel, row.agent_key) == ("s-1", "u-7", "web", "bot")
    assert row.args == {"timezone": "Europe/Paris"}
    assert row.for_llm_bytes == len(body["for_llm"].encode())
    assert row.actor_kind == "api_key"


def test_unknown_tool_gets_a_correction_hint_and_the_available_names(member_a, agent):
    body = call(member_a, "cat", {"path": "x"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith('unknown tool: cat. INSTEAD USE: read_file(path: "...")')
    assert "Available tools: " in body["for_llm"]
    assert "datetime" in body["for_llm"].split("Available tools: ")[1]
    close = call(member_a, "datetim")
    assert "Did you mean: datetime?" in close["for_llm"]


def test_a_tool_outside_the_profile_is_refused_and_not_listed(member_a, agent, tenant_a):
    set_tenant_policy(tenant_a, profile="minimal")
    body = call(member_a, "datetime")
    assert body == {**body, "is_error": True, "for_llm": "tool not allowed by policy: datetime"}
    listed = member_a.get("/api/v1/agents/bot/tools?include_unavailable=true").json()
    assert [t["function"]["name"] for t in listed["tools"]] == ["session_status"]
    assert ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"]).decision == "denied"


def test_the_per_request_allow_list_is_a_final_intersection(member_a, agent):
    body = call(member_a, "datetime", context={"tool_allow": ["group:fs"]})
    assert body["for_llm"] == "tool not allowed by policy: datetime"
    assert call(member_a, "datetime", context={"tool_allow": ["group:automation"]})["is_error"] is False


def test_subagents_lose_the_subagent_deny_list(member_a, agent):
    body = call(member_a, "session_status", context={"subagent_depth": 1})
    assert body["for_llm"] == "tool not allowed by policy: session_status"


def test_aliases_resolve_to_the_catalog_tool(member_a, agent, tenant_a):
    body = call(member_a, "WebFetch", {})
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert (row.tool, row.resolved_tool) == ("WebFetch", "web_fetch")


def test_unavailable_tools_say_so(member_a, agent, monkeypatch, tenant_a):
    monkeypatch.delitem(registry._IMPLEMENTATIONS, "credentialed_exec")  # a deployment without it
    body = call(member_a, "credentialed_exec", {"binary": "gh"})
    assert body["is_error"] is True
    assert body["for_llm"] == "unavailable: credentialed_exec is not available in this deployment."
    assert ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"]).decision == "unavailable"


def test_empty_arguments_for_a_tool_with_required_parameters(member_a, agent):
    body = call(member_a, "credentialed_exec", {})
    assert body["for_llm"].startswith("Tool call had empty arguments (required: binary).")


def test_invalid_arguments_are_explained(member_a, agent):
    body = call(member_a, "datetime", {"timezone": 5, "extra": True})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("Invalid arguments for datetime: ")
    assert "Additional properties are not allowed ('extra' was unexpected)" in body["for_llm"]
    assert "timezone: 5 is not of type 'string'" in body["for_llm"]


def test_a_crashing_tool_becomes_an_error_result(member_a, agent, fake_datetime, tenant_a):
    def boom(ctx, args):
        raise RuntimeError("disk on fire")

    fake_datetime(boom)
    body = call(member_a, "datetime")
    assert body["is_error"] is True
    assert body["for_llm"] == 'tool "datetime" panicked: RuntimeError: disk on fire'
    assert ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"]).status == "error"


def test_outputs_and_recorded_args_are_scrubbed(member_a, agent, fake_datetime, tenant_a):
    secret = "sk-" + "a" * 30
    fake_datetime(lambda ctx, args: ToolResult.ok(f"key is {secret}", for_user=f"user sees {secret}"))
    body = call(member_a, "datetime", {"timezone": secret})
    assert secret not in body["for_llm"]
    assert secret not in body["for_user"]
    assert "[REDACTED]" in body["for_llm"]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert secret not in str(row.args)


def test_scrubbing_can_be_switched_off_per_tenant(member_a, agent, fake_datetime, tenant_a):
    set_tenant_policy(tenant_a, scrub_credentials=False)
    secret = "sk-" + "b" * 30
    fake_datetime(lambda ctx, args: ToolResult.ok(secret))
    assert call(member_a, "datetime")["for_llm"] == secret


def test_rate_limit_per_session_key(member_a, agent, tenant_a):
    set_tenant_policy(tenant_a, rate_limit_per_hour=2)
    for _ in range(2):
        assert call(member_a, "datetime", context={"session_key": "s1"})["is_error"] is False
    refused = call(member_a, "datetime", context={"session_key": "s1"})
    assert refused["for_llm"] == "tool rate limit exceeded: 2 actions/hour for key s1"
    assert call(member_a, "datetime", context={"session_key": "s2"})["is_error"] is False
    assert call(member_a, "datetime")["is_error"] is False  # no session key: not limited
    decisions = list(
        ToolCall.objects.for_tenant(tenant_a).filter(session_key="s1").values_list("decision", flat=True)
    )
    assert sorted(decisions) == ["allowed", "allowed", "rate_limited"]


def test_domain_tool_calls_run_the_flat_tool(member_a, agent, tenant_a):
    body = call(member_a, "agent", {"resource": "time", "action": "now", "timezone": "UTC"}, style="strap")
    assert body["is_error"] is False
    assert "UTC" in body["for_llm"]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert (row.tool, row.resolved_tool) == ("datetime", "datetime")
    inferred = call(member_a, "agent", {"action": "now"}, style="strap")
    assert inferred["is_error"] is False
    wrong = call(member_a, "agent", {"resource": "time", "action": "later"}, style="strap")
    assert wrong["for_llm"] == "agent: unknown action time/'later'; use one of: now."
    hint = call(member_a, "bash", {"command": "ls"}, style="strap", context={"tool_allow": ["datetime"]})
    assert hint["for_llm"] == "tool not allowed by policy: bash"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tool": "datetime"}, "agent"),
        ({"agent": "bot", "tool": "datetime", "args": [1]}, "args"),
        ({"agent": "bot", "tool": "datetime", "args": {}, "junk": 1}, "junk"),
        ({"agent": "bot", "tool": "datetime", "context": {"origin": "moon"}}, "context"),
        ({"agent": "bot", "tool": "datetime", "context": {"subagent_depth": 9}}, "context"),
        ({"agent": "bot", "tool": "datetime", "context": {"nope": 1}}, "context"),
        ({"agent": "bot", "tool": 7}, "tool"),
    ],
)
def test_malformed_requests_are_400_and_record_nothing(member_a, agent, tenant_a, body, field):
    before = tenant_state(tenant_a)
    response = member_a.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert tenant_state(tenant_a) == before


def test_unknown_agent_is_404(member_a, agent):
    response = member_a.post("/api/v1/runtime/execute", {"agent": "ghost", "tool": "datetime"}, format="json")
    assert response.status_code == 404


def test_viewers_cannot_execute(viewer_a, agent, tenant_a):
    before = tenant_state(tenant_a)
    response = viewer_a.post("/api/v1/runtime/execute", {"agent": "bot", "tool": "datetime"}, format="json")
    assert response.status_code == 403
    assert tenant_state(tenant_a) == before


def test_an_omitted_context_means_the_serializers_defaults():
    from apps.runtime.api.serializers import CallContextInput
    from apps.runtime.api.views import DEFAULT_CONTEXT

    assert CallContextInput(data={}).run_validation({}) == DEFAULT_CONTEXT


@pytest.mark.parametrize(
    "args",
    [
        {"path": "a.txt", "content": "a\x00b"},
        {"path": "a\x00.txt", "content": "x"},
        {"path": "a.txt", "content": "x", "nested\x00": "y"},
    ],
)
def test_nul_characters_in_arguments_are_refused_and_recorded(member_a, agent, tenant_a, args):
    body = call(member_a, "write_file", args)
    assert body["is_error"] is True
    assert "NUL character" in body["for_llm"]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert row.decision == "invalid"
    assert "\x00" not in json.dumps(row.args)


def test_nul_characters_in_a_tools_output_are_stored_replaced(member_a, agent, tenant_a):
    body = call(member_a, "exec", {"command": "printf 'a\\000b'; exit 3"})
    assert body["is_error"] is True
    assert "a\x00b" in body["for_llm"]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert "a\ufffdb" in row.error
