"""Exec approvals through the API: execute asks, waits, times out; decisions, allow-always rules,
revocation, ``"wait": false`` with the background run (the function the cluster runs), per tenant and
agent."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent, ToolCall
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.tenants import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant

pytestmark = pytest.mark.django_db

EXECUTE = "/api/v1/runtime/execute"


@pytest.fixture(autouse=True)
def short_timeout(settings):
    settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS = 1


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def set_policy(tenant: Tenant, **values) -> None:
    target = policy_services.target("tenant")
    saved = policy_services.current(tenant, target)
    document = {**(saved.document if saved is not None else {}), **values}
    policy_services.policy_save(Actor.system(tenant), target, document)
    tenant.refresh_from_db()


def on_miss(tenant: Tenant) -> None:
    set_policy(tenant, execApproval={"security": "full", "ask": "on-miss"})


def run(client, command, agent="bot", **context):
    body = {"agent": agent, "tool": "exec", "args": {"command": command}}
    if context:
        body["context"] = context
    return client.post(EXECUTE, body, format="json")


def pending(tenant) -> PendingApproval:
    return PendingApproval.objects.for_tenant(tenant).get(status="pending")


# --- asking and timing out -----------------------------------------------------------------------------


def test_a_safe_command_runs_without_asking(member_a, agent, tenant_a):
    on_miss(tenant_a)
    response = run(member_a, "echo hello")
    assert response.status_code == 200
    assert response.json()["is_error"] is False
    assert "hello" in response.json()["for_llm"]
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()


def test_an_unanswered_approval_times_out_and_the_call_is_refused(member_a, agent, tenant_a):
    on_miss(tenant_a)
    response = run(member_a, "touch made-it", session_key="s1")

    assert response.status_code == 200
    body = response.json()
    assert body["is_error"] is True
    assert body["for_llm"] == "approval timed out after 1s"
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert approval.status == "timed_out"
    assert approval.command == "touch made-it"
    assert approval.session_key == "s1"
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.decision, str(call.id.hex)) == ("approval_denied", body["call_id"])
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="approval.timed_out").count() == 1


def test_the_timeout_message_formats_minutes_like_go(member_a, agent, tenant_a, settings):
    from apps.policy.approval_services import go_duration

    assert go_duration(120) == "2m0s"
    assert go_duration(90.5) == "1m30.5s"
    assert go_duration(2) == "2s"


def test_package_installs_ask_with_the_default_settings(member_a, agent, tenant_a):
    response = run(member_a, "pip install requests")
    assert response.json()["for_llm"] == "approval timed out after 1s"
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert approval.package_install is True
    assert "installs or removes packages" in approval.reason


def test_the_system_origin_never_waits(member_a, agent, tenant_a):
    set_policy(tenant_a, execApproval={"security": "full", "ask": "always"})
    response = run(member_a, "echo from-cron", origin="system")
    assert response.json()["is_error"] is False
    assert "from-cron" in response.json()["for_llm"]
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()


def test_security_deny_refuses_at_once(member_a, agent, tenant_a):
    set_policy(tenant_a, execApproval={"security": "deny"})
    response = run(member_a, "echo hi")
    assert response.json()["is_error"] is True
    assert "security: deny" in response.json()["for_llm"]
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "approval_denied"


def test_a_chain_behind_an_allowlisted_first_word_is_refused(member_a, agent, tenant_a):
    set_policy(tenant_a, execApproval={"security": "allowlist", "ask": "off", "allowlist": ["ls"]})
    response = run(member_a, "ls && touch pwned")
    assert response.json()["is_error"] is True
    assert "touch pwned" in response.json()["for_llm"]
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()
