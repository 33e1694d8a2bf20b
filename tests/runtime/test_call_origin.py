"""A call's origin is its caller's, never the request's: a member key cannot declare its way past an exec
approval or an ``originDeny`` list, a key an owner restricted to ``comm`` calls with origin ``comm``
(tool call and audit rows), ``system`` is Toolgate's own, and no other context field widens what the
caller gets (internal channels, provider profiles)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts import services
from apps.audit.models import AuditEvent, ToolCall
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.runtime import pipeline
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from apps.toolkit import gateway
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

EXECUTE = "/api/v1/runtime/execute"
ORIGINS = ("user", "comm", "app", "skill", "system")


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def set_policy(tenant: Tenant, **values: Any) -> None:
    target = policy_services.target("tenant")
    saved = policy_services.current(tenant, target)
    document = {**(saved.document if saved is not None else {}), **values}
    policy_services.policy_save(Actor.system(tenant), target, document)
    tenant.refresh_from_db()


def exec_asks(tenant: Tenant) -> None:
    """Every exec command needs a human's approval."""
    set_policy(tenant, execApproval={"security": "full", "ask": "always"})


def key_client(tenant: Tenant, *, origin: str, role: str = Role.MEMBER):  # type: ignore[no-untyped-def]
    _, raw = services.api_key_create(
        actor=Actor.system(tenant), name=f"{origin} key", role=role, origin=origin
    )
    return factories.key_client(raw)


def execute(client, tool: str = "exec", args: dict[str, Any] | None = None, **context: Any):  # type: ignore[no-untyped-def]
    body: dict[str, Any] = {"agent": "bot", "tool": tool, "args": args or {"command": "touch made-it"}}
    body["context"] = {"wait": False, **context}
    return client.post(EXECUTE, body, format="json")


def assert_refused(response, code: str, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"]


# --- a member key (origin user) and every origin it may send ---------------------------------------------


@pytest.mark.parametrize("origin", [o for o in ORIGINS if o != "user"])
def test_a_member_key_naming_another_origin_is_refused_and_nothing_runs(member_a, agent, tenant_a, origin):
    exec_asks(tenant_a)
    before = tenant_state(tenant_a)

    response = execute(member_a, origin=origin)

    assert_refused(response, "origin_not_allowed", f"'{origin}'", "origin 'user'")
    assert tenant_state(tenant_a) == before  # no tool call, no approval, no audit row


@pytest.mark.parametrize("context", [{}, {"origin": "user"}])
def test_a_member_key_with_its_own_origin_or_none_waits_for_the_approval(member_a, agent, tenant_a, context):
    exec_asks(tenant_a)

    response = execute(member_a, **context)

    assert response.status_code == 202, response.content
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert (str(approval.pk), approval.status, approval.origin) == (
        response.json()["approval_id"],
        "pending",
        "user",
    )
    assert not ToolCall.objects.for_tenant(tenant_a).exists()  # nothing ran


def test_the_system_origin_is_refused_even_with_the_default_settings(member_a, agent, tenant_a):
    before = tenant_state(tenant_a)
    response = execute(member_a, args={"command": "pip install requests"}, origin="system")
    assert_refused(response, "origin_not_allowed", "Toolgate's own jobs")
    assert tenant_state(tenant_a) == before


def test_a_dashboard_user_is_origin_user(agent, tenant_a):
    from rest_framework.test import APIClient

    exec_asks(tenant_a)
    client = APIClient()
    client.force_login(factories.make_user(tenant_a, Role.OWNER, email="olga@tenant-a.test"))
    headers = {"HTTP_X_TOOLGATE_TENANT": tenant_a.slug}
    body = {"agent": "bot", "tool": "exec", "args": {"command": "touch x"}}

    refused = client.post(EXECUTE, {**body, "context": {"origin": "system"}}, format="json", **headers)
    assert_refused(refused, "origin_not_allowed", "a dashboard user")
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()

    waiting = client.post(EXECUTE, {**body, "context": {"wait": False}}, format="json", **headers)
    assert waiting.status_code == 202
    assert PendingApproval.objects.for_tenant(tenant_a).get().origin == "user"


# --- a key an owner restricted to an origin ----------------------------------------------------------------


@pytest.mark.parametrize("context", [{}, {"origin": "comm"}])
def test_a_comm_keys_calls_carry_origin_comm_in_the_tool_call(agent, tenant_a, context):
    comm = key_client(tenant_a, origin="comm")

    response = execute(comm, tool="datetime", args={"timezone": "UTC"}, **context)

    assert response.status_code == 200, response.content
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.origin, call.decision) == ("comm", "allowed")
    listed = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER)).get("/api/v1/tool-calls/")
    assert listed.json()["results"][0]["origin"] == "comm"


def test_a_comm_keys_approval_and_its_audit_carry_origin_comm(agent, tenant_a):
    exec_asks(tenant_a)
    comm = key_client(tenant_a, origin="comm")

    response = execute(comm)

    assert response.status_code == 202
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert approval.origin == "comm"
    requested = AuditEvent.objects.for_tenant(tenant_a).get(verb="approval.requested")
    assert requested.data["origin"] == "comm"


@pytest.mark.parametrize("origin", ["user", "app", "skill", "system"])
def test_a_comm_key_cannot_name_another_origin(agent, tenant_a, origin):
    set_policy(tenant_a, originDeny={"comm": ["exec"]})
    comm = key_client(tenant_a, origin="comm")
    before = tenant_state(tenant_a)

    response = execute(comm, args={"command": "echo hi"}, origin=origin)

    assert_refused(response, "origin_not_allowed", "origin 'comm'")
    assert tenant_state(tenant_a) == before


def test_origin_deny_applies_to_the_keys_origin(member_a, agent, tenant_a):
    set_policy(tenant_a, originDeny={"comm": ["exec"]})
    comm = key_client(tenant_a, origin="comm")

    denied = execute(comm, args={"command": "echo hi"})
    ran = execute(member_a, args={"command": "echo hi"})

    assert denied.json()["is_error"] is True
    assert "not allowed for calls of origin 'comm'" in denied.json()["for_llm"]
    assert ran.json()["is_error"] is False
    decisions = sorted(ToolCall.objects.for_tenant(tenant_a).values_list("origin", "decision"))
    assert decisions == [("comm", "origin_denied"), ("user", "allowed")]


# --- Toolgate's own calls -------------------------------------------------------------------------------


def test_toolgates_own_system_calls_still_run_without_asking(agent, tenant_a):
    exec_asks(tenant_a)
    outcome = pipeline.execute(
        actor=Actor.system(tenant_a),
        request=gateway.CallRequest(
            agent=agent, tool="exec", args={"command": "echo from-cron"}, origin="system"
        ),
    )
    assert outcome.result.is_error is False
    assert "from-cron" in outcome.result.for_llm
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()
    assert ToolCall.objects.for_tenant(tenant_a).get().origin == "system"


def test_toolgates_own_calls_without_an_origin_ask_like_a_user(agent, tenant_a):
    exec_asks(tenant_a)
    step = pipeline.call(
        actor=Actor.system(tenant_a),
        request=gateway.CallRequest(agent=agent, tool="exec", args={"command": "touch x"}),
        wait=False,
    )
    assert isinstance(step, pipeline.PendingCall)
    assert PendingApproval.objects.for_tenant(tenant_a).get().origin == "user"


def test_an_approved_call_that_did_not_wait_runs_with_the_keys_origin(agent, tenant_a):
    from apps.policy import approval_services, tasks

    exec_asks(tenant_a)
    comm = key_client(tenant_a, origin="comm")
    approval_id = execute(comm, args={"command": "echo approved"}).json()["approval_id"]
    approval = PendingApproval.objects.for_tenant(tenant_a).get(pk=approval_id)
    approval_services.approval_decide(actor=Actor.system(tenant_a), approval=approval, decision="allow-once")

    tasks.run_approved_call(approval_id, str(tenant_a.pk))

    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.origin, call.decision, call.actor_kind) == ("comm", "allowed", "api_key")


# --- other context fields only narrow ---------------------------------------------------------------------


@pytest.mark.parametrize("channel", ["system", "teammate", "dashboard"])
def test_internal_channels_are_refused_to_keys(member_a, agent, tenant_a, channel):
    before = tenant_state(tenant_a)

    called = execute(member_a, tool="datetime", args={}, channel=channel)
    listed = member_a.get(f"/api/v1/agents/bot/tools?channel={channel}")

    assert_refused(called, "channel_reserved", f"'{channel}'")
    assert_refused(listed, "channel_reserved", f"'{channel}'")
    assert tenant_state(tenant_a) == before


def test_a_provider_profile_cannot_widen_the_tenants_profile(member_a, agent, tenant_a):
    set_policy(tenant_a, profile="minimal", byProvider={"openai": {"profile": "full"}})

    listed = member_a.get("/api/v1/agents/bot/tools?provider=openai&format=mcp").json()
    called = execute(member_a, tool="datetime", args={}, provider="openai")

    assert "datetime" not in {tool["name"] for tool in listed["tools"]}
    assert called.json()["for_llm"] == "tool not allowed by policy: datetime"


def test_a_channel_group_only_narrows(member_a, agent, tenant_a):
    set_policy(tenant_a, allow=["datetime", "session_status"])
    target = policy_services.target("channel", channel="telegram", chat_id="c1")
    policy_services.policy_save(Actor.system(tenant_a), target, {"allow": ["datetime", "exec"]})

    plain = member_a.get("/api/v1/agents/bot/tools?format=mcp").json()
    in_chat = member_a.get("/api/v1/agents/bot/tools?format=mcp&channel=telegram&chat_id=c1").json()

    assert {t["name"] for t in plain["tools"]} == {"datetime", "session_status"}
    assert {t["name"] for t in in_chat["tools"]} == {"datetime"}
    assert (
        execute(member_a, args={"command": "echo hi"}, channel="telegram", chat_id="c1").json()["for_llm"]
        == "tool not allowed by policy: exec"
    )


# --- keys: who may create a restricted one -------------------------------------------------------------


def test_an_owner_creates_a_comm_key_shown_in_listings_and_audited(owner_a, tenant_a):
    response = owner_a.post("/api/v1/api-keys/", {"name": "telegram bridge", "origin": "comm"}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["origin"] == "comm"
    assert ApiKey.objects.for_tenant(tenant_a).get(pk=body["id"]).origin == "comm"
    listed = {k["id"]: k for k in owner_a.get("/api/v1/api-keys/").json()["results"]}
    assert listed[body["id"]]["origin"] == "comm"
    assert owner_a.get(f"/api/v1/api-keys/{body['id']}/").json()["origin"] == "comm"
    created = AuditEvent.objects.for_tenant(tenant_a).get(verb="api_key.created", target_id=body["id"])
    assert created.data["origin"] == "comm"


def test_a_key_is_origin_user_by_default(owner_a):
    assert owner_a.post("/api/v1/api-keys/", {"name": "plain"}, format="json").json()["origin"] == "user"


@pytest.mark.parametrize("persona", ["admin_a", "member_a", "viewer_a"])
def test_only_owners_create_keys_of_any_origin(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)
    response = client.post("/api/v1/api-keys/", {"name": "sneaky", "origin": "comm"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert tenant_state(tenant_a) == before


def test_another_tenants_owner_cannot_see_or_revoke_a_restricted_key(owner_a, outsider, tenant_a):
    key_id = owner_a.post("/api/v1/api-keys/", {"name": "bridge", "origin": "comm"}, format="json").json()[
        "id"
    ]
    before = tenant_state(tenant_a)

    assert outsider.get(f"/api/v1/api-keys/{key_id}/").status_code == 404
    assert outsider.delete(f"/api/v1/api-keys/{key_id}/").status_code == 404
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("origin", "words"),
    [
        ("robot", "'robot' is not one of user, comm, app, skill"),
        ("system", "'system' belongs to Toolgate's own jobs and no API key can have it"),
        ("", "is not one of"),
        (7, "Must be a string"),
    ],
)
def test_a_key_with_an_invalid_origin_is_400_with_nothing_created(owner_a, tenant_a, origin, words):
    before = tenant_state(tenant_a)
    response = owner_a.post("/api/v1/api-keys/", {"name": "bad", "origin": origin}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "origin" in error["details"]
    assert words in error["details"]["origin"][0]
    assert tenant_state(tenant_a) == before


def test_create_api_key_command_takes_an_origin_but_never_system(tenant_a):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command(
        "create_api_key", "--tenant", tenant_a.slug, "--name", "bridge", "--origin", "comm", stdout=out
    )
    assert "origin comm" in out.getvalue()
    assert ApiKey.objects.for_tenant(tenant_a).get(name="bridge").origin == "comm"

    with pytest.raises(CommandError, match="Toolgate's own jobs"):
        call_command("create_api_key", "--tenant", tenant_a.slug, "--name", "root", "--origin", "system")
    assert not ApiKey.objects.for_tenant(tenant_a).filter(name="root").exists()


def test_the_dashboard_key_form_takes_an_origin_and_the_list_shows_it(tenant_a):
    from django.urls import reverse

    from tests.dashboard.personas import login

    client = login(factories.make_user(tenant_a, Role.OWNER, email="owen@tenant-a.test"))
    url = reverse("dashboard:api_key_create")

    created = client.post(url, {"name": "bridge", "role": "member", "origin": "comm"})
    refused = client.post(url, {"name": "root", "role": "member", "origin": "system"})

    assert created.status_code == 200
    assert ApiKey.objects.for_tenant(tenant_a).get(name="bridge").origin == "comm"
    assert refused.status_code == 200
    assert not ApiKey.objects.for_tenant(tenant_a).filter(name="root").exists()
    page = client.get(reverse("dashboard:api_keys")).content.decode()
    assert "<td>comm</td>" in page
