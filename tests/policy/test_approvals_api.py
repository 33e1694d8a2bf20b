"""Exec approvals through the API: execute asks, waits, times out; decisions, allow-always rules,
revocation, ``"wait": false`` with the background run (the function the cluster runs), per tenant and
agent."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.accounts import services
from apps.audit.models import AuditEvent, ToolCall
from apps.policy import services as policy_services
from apps.policy import tasks
from apps.policy.approval_models import ApprovalRule, PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

EXECUTE = "/api/v1/runtime/execute"


@pytest.fixture(autouse=True)
def decision_window(settings):
    """Long enough for a test to decide before the approval expires, on a loaded machine too."""
    settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS = 30


@pytest.fixture
def quick_timeout(settings):
    """For the tests that wait for an approval nobody gives."""
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


def test_an_unanswered_approval_times_out_and_the_call_is_refused(member_a, agent, tenant_a, quick_timeout):
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


def test_package_installs_ask_with_the_default_settings(member_a, agent, tenant_a, quick_timeout):
    response = run(member_a, "pip install requests")
    assert response.json()["for_llm"] == "approval timed out after 1s"
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert approval.package_install is True
    assert "installs or removes packages" in approval.reason


def test_the_system_origin_never_waits_and_no_key_can_claim_it(member_a, agent, tenant_a):
    from apps.runtime import pipeline
    from apps.toolkit import gateway

    set_policy(tenant_a, execApproval={"security": "full", "ask": "always"})
    outcome = pipeline.execute(
        actor=Actor.system(tenant_a),
        request=gateway.CallRequest(
            agent=agent, tool="exec", args={"command": "echo from-cron"}, origin="system"
        ),
    )
    assert outcome.result.is_error is False
    assert "from-cron" in outcome.result.for_llm
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()

    refused = run(member_a, "echo from-a-key", origin="system")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "origin_not_allowed"
    assert ToolCall.objects.for_tenant(tenant_a).count() == 1


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


# --- wait: false, decisions, the background run ---------------------------------------------------------


def ask_later(client, command, agent="bot"):
    response = run(client, command, agent=agent, wait=False)
    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"approval_id", "call_id", "status"}
    assert body["status"] == "pending"
    return body


def decide(client, approval_id, decision, reason="", status=200):
    response = client.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": decision, "reason": reason}, format="json"
    )
    assert response.status_code == status, response.content
    return response.json()


def run_queued(tenant, approval_id, django_capture_on_commit_callbacks, callbacks):
    """Run the on-commit hooks (they queue the job) and then the job itself, as the cluster would."""
    from django_q.models import OrmQ

    for callback in callbacks:
        callback()
    queued = [q.task for q in OrmQ.objects.all()]
    job = next(t for t in queued if t["args"] == (str(approval_id), str(tenant.pk)))
    assert job["func"] == "apps.policy.tasks.run_approved_call"
    return tasks.run_approved_call(*job["args"])


def test_wait_false_answers_202_and_the_result_is_read_after_the_decision(
    member_a, admin_a, agent, tenant_a, django_capture_on_commit_callbacks
):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch made-by-job && echo done")
    detail = admin_a.get(f"/api/v1/approvals/{asked['approval_id']}/").json()
    assert (detail["status"], detail["result"], detail["wait"]) == ("pending", None, False)
    assert not ToolCall.objects.for_tenant(tenant_a).exists()

    with django_capture_on_commit_callbacks() as callbacks:
        decided = decide(admin_a, asked["approval_id"], "allow-once", "looks fine")
    assert (decided["status"], decided["decision"], decided["decision_reason"]) == (
        "allowed",
        "allow-once",
        "looks fine",
    )
    assert (
        run_queued(tenant_a, asked["approval_id"], django_capture_on_commit_callbacks, callbacks) == "allowed"
    )

    detail = admin_a.get(f"/api/v1/approvals/{asked['approval_id']}/").json()
    assert detail["result"]["is_error"] is False
    assert "done" in detail["result"]["for_llm"]
    assert detail["result"]["call_id"] == asked["call_id"]
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.id.hex, call.decision) == (asked["call_id"], "allowed")
    # the job runs once: a second run finds nothing to do
    assert tasks.run_approved_call(asked["approval_id"], str(tenant_a.pk)) == "nothing to run"
    assert ToolCall.objects.for_tenant(tenant_a).count() == 1


def test_a_denied_call_that_did_not_wait_is_recorded_as_refused(
    member_a, admin_a, agent, tenant_a, django_capture_on_commit_callbacks
):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch nope")
    with django_capture_on_commit_callbacks() as callbacks:
        decide(admin_a, asked["approval_id"], "deny", "not today")
    assert run_queued(tenant_a, asked["approval_id"], django_capture_on_commit_callbacks, callbacks) == (
        "approval_denied"
    )
    result = admin_a.get(f"/api/v1/approvals/{asked['approval_id']}/").json()["result"]
    assert result["is_error"] is True
    assert "not today" in result["for_llm"]
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "approval_denied"


def test_a_package_install_approved_later_passes_its_deny_group(
    member_a, admin_a, agent, tenant_a, django_capture_on_commit_callbacks
):
    # pip itself may be missing here; what matters is that the deny group no longer refuses the call
    asked = ask_later(member_a, "pip install --no-index no-such-package-xyz")
    with django_capture_on_commit_callbacks() as callbacks:
        decide(admin_a, asked["approval_id"], "allow-once")
    run_queued(tenant_a, asked["approval_id"], django_capture_on_commit_callbacks, callbacks)
    result = admin_a.get(f"/api/v1/approvals/{asked['approval_id']}/").json()["result"]
    assert "package_install" not in result["for_llm"]
    assert "deny group" not in result["for_llm"]
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "allowed"


def test_deciding_twice_is_409_and_changes_nothing(member_a, admin_a, agent, tenant_a):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch x")
    decide(admin_a, asked["approval_id"], "deny")
    before = tenant_state(tenant_a)
    body = decide(admin_a, asked["approval_id"], "allow-once", status=409)
    assert body["error"]["code"] == "conflict"
    assert "not found or already resolved" in body["error"]["message"]
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "deny", "reason": "x" * 501}, "reason"),
        ({"decision": 1}, "decision"),
        ({"reason": "no decision"}, "decision"),
        ({"decision": "deny", "extra": 1}, "extra"),
    ],
)
def test_decisions_are_validated(member_a, admin_a, agent, tenant_a, body, field):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch x")
    before = tenant_state(tenant_a)
    response = admin_a.post(f"/api/v1/approvals/{asked['approval_id']}/decide", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert tenant_state(tenant_a) == before


def test_decisions_are_audited_and_published(member_a, admin_a, agent, tenant_a):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch x")
    decide(admin_a, asked["approval_id"], "allow-always", "trusted")
    verbs = list(AuditEvent.objects.for_tenant(tenant_a).values_list("verb", "actor_kind", "data"))
    decided = [v for v in verbs if v[0] == "approval.decided"]
    assert decided
    assert decided[0][1] == "api_key"
    assert decided[0][2]["reason"] == "trusted"
    assert any(v[0] == "approval_rule.created" for v in verbs)


# --- allow-always rules -----------------------------------------------------------------------------------


def test_allow_always_applies_to_the_same_tenant_agent_and_shape_only(
    member_a, admin_a, agent, tenant_a, tenant_b, outsider
):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch first.txt")
    decide(admin_a, asked["approval_id"], "allow-always")
    rule = ApprovalRule.objects.for_tenant(tenant_a).get()
    assert rule.binary_path.endswith("/touch")
    assert rule.shape == f"{rule.binary_path} *"

    # the same shape, other arguments: runs at once
    same = run(member_a, "touch second.txt", wait=False)
    assert same.status_code == 200
    assert same.json()["is_error"] is False
    # another shape of the same binary: asks
    assert run(member_a, "touch -d yesterday third.txt", wait=False).status_code == 202
    # another agent of the same tenant: asks
    services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    assert run(member_a, "touch second.txt", agent="other", wait=False).status_code == 202
    # tenant B, an agent with the same key: asks
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    on_miss(tenant_b)
    assert run(outsider, "touch second.txt", wait=False).status_code == 202
    # a chain riding on the approved shape: asks for the rest
    assert run(member_a, "touch ok.txt && rm -f ok.txt", wait=False).status_code == 202


def test_revoking_a_rule_makes_the_next_call_ask_again(member_a, admin_a, agent, tenant_a):
    on_miss(tenant_a)
    decide(admin_a, ask_later(member_a, "touch a")["approval_id"], "allow-always")
    rule = ApprovalRule.objects.for_tenant(tenant_a).get()
    assert run(member_a, "touch b", wait=False).status_code == 200

    listed = admin_a.get("/api/v1/approval-rules/").json()["results"]
    assert [r["id"] for r in listed] == [str(rule.pk)]
    revoked = admin_a.delete(f"/api/v1/approval-rules/{rule.pk}/")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert revoked.json()["revoked_by"]["kind"] == "api_key"

    assert run(member_a, "touch c", wait=False).status_code == 202
    again = admin_a.delete(f"/api/v1/approval-rules/{rule.pk}/")
    assert again.status_code == 409
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="approval_rule.revoked").count() == 1


def test_lists_filter_and_stay_bounded(member_a, admin_a, agent, tenant_a, django_assert_max_num_queries):
    on_miss(tenant_a)
    for i in range(5):
        ask_later(member_a, f"touch file-{i}")
    services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    ask_later(member_a, "touch other", agent="other")
    decide(admin_a, PendingApproval.objects.for_tenant(tenant_a).filter(agent_key="bot")[0].pk, "deny")

    with django_assert_max_num_queries(6):
        everything = admin_a.get("/api/v1/approvals/").json()["results"]
    assert len(everything) == 6
    assert len(admin_a.get("/api/v1/approvals/?status=pending").json()["results"]) == 5
    assert len(admin_a.get("/api/v1/approvals/?agent=other").json()["results"]) == 1
    bad = admin_a.get("/api/v1/approvals/?status=sleeping")
    assert bad.status_code == 400
    assert "status" in bad.json()["error"]["details"]


def test_the_expiry_sweep_times_out_what_is_past_its_expiry(member_a, agent, tenant_a, tenant_b):
    from datetime import timedelta

    from django.utils import timezone

    on_miss(tenant_a)
    asked = ask_later(member_a, "touch late")
    assert tasks.expire_approvals() == 0
    PendingApproval.objects.for_tenant(tenant_a).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks.expire_approvals() == 1
    assert PendingApproval.objects.for_tenant(tenant_a).get(pk=asked["approval_id"]).status == "timed_out"
    assert tasks.expire_approvals() == 0


@pytest.mark.usefixtures("registered_schedules")
def test_the_sweep_is_scheduled_every_minute():
    from django_q.models import Schedule

    schedule = Schedule.objects.get(name=tasks.EXPIRE_APPROVALS_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "apps.policy.tasks.expire_approvals",
        "I",
        1,
    )


# --- waiting, decided from another thread -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_waiting_call_runs_once_allowed(tenant_a, settings):
    from tests import factories

    settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS = 30
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    on_miss(tenant_a)
    member = factories.key_client(factories.make_api_key(tenant_a, "member"))
    admin = factories.key_client(factories.make_api_key(tenant_a, "admin"))
    answers: list = []

    def decide_when_asked():
        try:
            for _ in range(200):
                approval = PendingApproval.objects.for_tenant(tenant_a).filter(status="pending").first()
                if approval is not None:
                    answers.append(decide(admin, approval.pk, "allow-once"))
                    return
                threading.Event().wait(0.05)
        except BaseException as error:
            answers.append(error)
            raise
        finally:
            connection.close()

    decider = threading.Thread(target=decide_when_asked)
    decider.start()
    response = run(member, "touch waited && echo waited-for-you")
    decider.join(10)
    assert answers
    assert response.status_code == 200
    assert response.json()["is_error"] is False
    assert "waited-for-you" in response.json()["for_llm"]
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "allowed"


def test_the_requesting_key_reads_its_own_approval_and_no_other(member_a, admin_a, agent, tenant_a):
    from tests import factories

    on_miss(tenant_a)
    mine = ask_later(member_a, "touch mine")
    own = member_a.get(f"/api/v1/approvals/{mine['approval_id']}/")
    assert own.status_code == 200
    assert (own.json()["status"], own.json()["call_id"]) == ("pending", mine["call_id"])

    other_member = factories.key_client(factories.make_api_key(tenant_a, "member"))
    refused = other_member.get(f"/api/v1/approvals/{mine['approval_id']}/")
    assert refused.status_code == 403
    assert "admin" in refused.json()["error"]["message"]
    assert member_a.get("/api/v1/approvals/").status_code == 403
    assert admin_a.get(f"/api/v1/approvals/{mine['approval_id']}/").status_code == 200


# --- hostile command lines ask instead of running ----------------------------------------------------------


@pytest.fixture
def planted(agent, tenant_a):
    """The agent's workspace with a program named ``ls`` and a repository in a sub-directory, both set
    up to leave a file behind if they ever run."""
    import os
    import shutil
    import subprocess

    from apps.toolkit.workspace import workspace_for

    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    fake = workspace / "ls"
    fake.write_text("#!/bin/sh\ntouch made-by-fake-ls\n")
    os.chmod(fake, 0o700)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(workspace / "sub")], check=True)
        with open(workspace / "sub" / ".git" / "config", "a") as config:
            config.write(
                "[core]\n\tfsmonitor = touch ../made-by-fsmonitor\n\tpager = touch ../made-by-pager\n"
            )
    return workspace


@pytest.mark.parametrize(
    ("command", "would_write"),
    [
        ("sort --out=made-by-sort /dev/null", "made-by-sort"),  # --out is --output
        ("sed --expr='w made-by-sed' /dev/null", "made-by-sed"),  # --expr is --expression
        ("find . -maxdepth 0 -fprint made-by-find", "made-by-find"),
        ("uniq /dev/null made-by-uniq", "made-by-uniq"),
        ("PATH=.:/usr/bin:/bin ls", "made-by-fake-ls"),  # an assignment before the program
        ("PATH=.; ls", "made-by-fake-ls"),  # an assignment statement before it
        (
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='touch made-by-pager' ls",
            "made-by-pager",
        ),
        ("cd sub && git status", "made-by-fsmonitor"),  # a repository planted one level down
        ("git -C sub log", "made-by-pager"),
    ],
)
def test_hostile_forms_of_read_only_programs_ask_and_nothing_runs(
    member_a, agent, tenant_a, planted, command, would_write
):
    on_miss(tenant_a)
    asked = ask_later(member_a, command)

    approval = PendingApproval.objects.for_tenant(tenant_a).get(pk=asked["approval_id"])
    assert (approval.status, approval.command) == ("pending", command)
    assert not ToolCall.objects.for_tenant(tenant_a).exists()
    assert not (planted / would_write).exists()


def test_the_same_programs_read_without_asking(member_a, agent, tenant_a, planted):
    on_miss(tenant_a)
    for command in ("sort /dev/null", "sed -n 1p /dev/null", "LC_ALL=C ls", "find . -maxdepth 1 -name 'l*'"):
        response = run(member_a, command, wait=False)
        assert response.status_code == 200, (command, response.content)
        assert response.json()["is_error"] is False, (command, response.json())
    listing = run(member_a, "LC_ALL=C ls", wait=False).json()["for_llm"]
    assert "ls" in listing.split()  # the workspace the hostile forms were tried in
    assert not PendingApproval.objects.for_tenant(tenant_a).exists()
    assert not (planted / "made-by-fake-ls").exists()
