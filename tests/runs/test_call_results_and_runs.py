"""A tool call's stored result and its run: what the caller got (scrubbed, bounded) is kept with the call
and shown by its REST resource and its dashboard page; the run whose model made it (the built-in
runner's, or an external runner's that names it) is recorded and links both ways."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts import services as tenant_services
from apps.audit.models import OUTPUT_STORE_CHARS, ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from apps.toolkit import registry
from apps.toolkit.results import ToolResult
from tests import factories
from tests.dashboard.personas import login
from tests.llm.fake_provider import chat_answer, scripted
from tests.llm.fake_provider import tool_call as call

pytestmark = pytest.mark.django_db


def execute(client, tool: str = "datetime", args: dict[str, Any] | None = None, **context: Any):
    body: dict[str, Any] = {"agent": "bot", "tool": tool, "args": args or {}}
    if context:
        body["context"] = context
    return client.post("/api/v1/runtime/execute", body, format="json")


@pytest.fixture
def dash(tenant_a: Tenant) -> Client:
    """Tenant A's dash, logged in to the dashboard."""
    return login(factories.make_user(tenant_a, Role.MEMBER, email="dash@a.test"))


@pytest.fixture
def fake_datetime(monkeypatch):
    def install(function):
        monkeypatch.setitem(registry._IMPLEMENTATIONS, "datetime", function)

    return install


def external_run(client) -> dict[str, Any]:
    created = client.post(
        "/api/v1/agents/bot/runs",
        {"session_key": "ext-1", "message": "go", "runner": "external", "wait": False},
        format="json",
    )
    assert created.status_code == 202, created.content
    run = created.json()
    assert client.post(f"/api/v1/runs/{run['id']}/claim").json()["status"] == "running"
    return run


# --- the stored result --------------------------------------------------------------------------------


def test_a_calls_resource_holds_the_result_the_caller_got_and_the_listing_leaves_it_out(member_a, agent):
    body = execute(member_a, args={"timezone": "Europe/Paris"}).json()
    assert body["is_error"] is False
    assert body["for_llm"]

    detail = member_a.get(f"/api/v1/tool-calls/{body['call_id']}/").json()

    assert detail["output"] == body["for_llm"]
    assert detail["output_for_user"] == ("" if body["for_user"] == body["for_llm"] else body["for_user"])
    assert detail["output_truncated"] is False
    assert detail["run"] is None
    listed = member_a.get("/api/v1/tool-calls/").json()["results"][0]
    assert uuid.UUID(listed["id"]) == uuid.UUID(body["call_id"])
    assert "output" not in listed
    assert listed["run"] is None


def test_the_stored_result_is_scrubbed_and_the_users_part_kept_when_it_differs(
    member_a, dash, agent, fake_datetime
):
    secret = "sk-" + "q" * 30
    fake_datetime(lambda ctx, args: ToolResult.ok(f"model: {secret}", for_user=f"user: {secret} <b>x</b>"))
    body = execute(member_a).json()

    detail = member_a.get(f"/api/v1/tool-calls/{body['call_id']}/").json()

    assert detail["output"] == body["for_llm"] == "model: [REDACTED]"
    assert detail["output_for_user"] == "user: [REDACTED] <b>x</b>"
    assert secret not in str(detail)
    page = dash.get(reverse("dashboard:tool_call_detail", args=[uuid.UUID(body["call_id"])])).content.decode()
    assert "model: [REDACTED]" in page
    assert "user: [REDACTED] &lt;b&gt;x&lt;/b&gt;" in page
    assert secret not in page


def test_a_long_result_is_kept_up_to_the_bound_and_marked_cut(member_a, dash, agent, fake_datetime, tenant_a):
    fake_datetime(lambda ctx, args: ToolResult.ok("".join(f"line {n}\n" for n in range(3000)) + "\x00"))
    body = execute(member_a).json()
    assert len(body["for_llm"]) > OUTPUT_STORE_CHARS  # the caller got all of it

    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])

    assert (len(row.output), row.output_truncated) == (OUTPUT_STORE_CHARS, True)
    page = dash.get(reverse("dashboard:tool_call_detail", args=[row.pk])).content.decode()
    assert 'data-field="output-truncated"' in page


def test_an_error_result_is_kept_too(member_a, agent, fake_datetime):
    fake_datetime(lambda ctx, args: ToolResult.error("the clock is broken"))
    body = execute(member_a).json()
    detail = member_a.get(f"/api/v1/tool-calls/{body['call_id']}/").json()
    assert (detail["status"], detail["output"], detail["error"]) == (
        "error",
        "the clock is broken",
        "the clock is broken",
    )


def test_another_tenants_call_is_404_with_its_result(member_a, outsider, agent):
    body = execute(member_a).json()
    assert outsider.get(f"/api/v1/tool-calls/{body['call_id']}/").status_code == 404


# --- the run of a call --------------------------------------------------------------------------------


def test_a_builtin_runs_calls_carry_the_run_and_link_both_ways(
    member_a, dash, agent, provider, fake, tenant_a
):
    fake.chat = scripted(
        chat_answer("", tool_calls=[call("datetime", {})]),
        chat_answer("It is late."),
    )
    run = member_a.post(
        "/api/v1/agents/bot/runs", {"session_key": "chat-r", "message": "time?"}, format="json"
    ).json()
    assert run["status"] == "completed"
    execute(member_a)  # a call outside the run

    in_run = member_a.get(f"/api/v1/tool-calls/?run={run['id']}").json()["results"]

    assert [c["tool"] for c in in_run] == ["datetime"]
    assert in_run[0]["run"] == run["id"]
    detail = member_a.get(f"/api/v1/tool-calls/{in_run[0]['id']}/").json()
    assert detail["output"]
    assert detail["output"] in fake.chat.requests[1]["messages"][-1]["content"]
    page = dash.get(reverse("dashboard:tool_call_detail", args=[in_run[0]["id"]])).content.decode()
    assert reverse("dashboard:runs_detail", args=[run["id"]]) in page
    run_page = dash.get(reverse("dashboard:runs_detail", args=[run["id"]])).content.decode()
    assert f"{reverse('dashboard:tool_calls')}?run={run['id']}" in run_page
    listed = dash.get(reverse("dashboard:tool_calls"), {"run": run["id"]}).content.decode()
    assert listed.count('href="/tool-calls/') >= 1
    assert in_run[0]["id"] in listed
    outside = ToolCall.objects.for_tenant(tenant_a).filter(run_id__isnull=True).get()
    assert str(outside.pk) not in listed


def test_an_external_runner_names_its_run_on_each_call(member_a, agent, tenant_a):
    run = external_run(member_a)

    body = execute(member_a, run=run["id"]).json()

    assert str(ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"]).run_id) == run["id"]


def test_a_run_that_is_not_this_agents_open_run_is_refused_and_nothing_is_recorded(
    member_a, outsider, agent, tenant_a, tenant_b
):
    run = external_run(member_a)
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    tenant_services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    other_agent = member_a.post(
        "/api/v1/runtime/execute", {"agent": "other", "tool": "datetime", "context": {"run": run["id"]}},
        format="json",
    )  # fmt: skip
    other_tenant = execute(outsider, run=run["id"])
    unknown = execute(member_a, run=str(uuid.uuid4()))
    malformed = execute(member_a, run="not-a-uuid")
    member_a.post(f"/api/v1/runs/{run['id']}/finish", {"status": "completed"}, format="json")
    ended = execute(member_a, run=run["id"])

    for refused in (other_agent, other_tenant, unknown, malformed, ended):
        assert refused.status_code == 400, refused.content
        assert "run" in refused.json()["error"]["details"]["context"]
    assert ToolCall.objects.for_tenant(tenant_a).count() == 0
    assert ToolCall.objects.for_tenant(tenant_b).count() == 0


def test_a_bad_run_filter_is_400_on_the_api_and_an_error_on_the_page(member_a, dash, agent):
    assert member_a.get("/api/v1/tool-calls/?run=nope").status_code == 400
    page = dash.get(reverse("dashboard:tool_calls"), {"run": "nope"}).content.decode()
    assert "Enter a valid UUID" in page
