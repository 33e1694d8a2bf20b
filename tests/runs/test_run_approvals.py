"""A run whose tool call needs a human's approval waits without holding a worker: it is parked
(``waiting``), the approval is decided through the API, the approvals job runs (or refuses) the call,
and the run goes on from the result in a new job. Cancelling a waiting run denies its approval."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.policy import tasks as policy_tasks
from apps.policy.approval_models import PendingApproval
from apps.runs import tasks as run_tasks
from apps.runs.models import Run
from apps.sessions.models import SessionMessage
from apps.teams import board, dispatch
from apps.teams.models import Task
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.toolkit import gateway
from apps.toolkit.workspace import workspace_for
from tests.llm.fake_provider import chat_answer, scripted
from tests.llm.fake_provider import tool_call as call
from tests.runs.test_run_takeover import Killed, kill_at
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def ask_on_miss(tenant_a: Tenant, settings: Any) -> None:
    """exec asks a human for anything not known to be safe; long enough to decide on a loaded machine."""
    settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS = 60
    target = policy_services.target("tenant")
    saved = policy_services.current(tenant_a, target)
    document = {
        **(saved.document if saved is not None else {}),
        "execApproval": {"security": "full", "ask": "on-miss"},
    }
    policy_services.policy_save(Actor.system(tenant_a), target, document)
    tenant_a.refresh_from_db()


def asks_for_exec(fake: Any, command: str) -> None:
    """The model runs ``command`` (asks), then writes a file (runs at once), then answers."""
    fake.chat = scripted(
        chat_answer(
            "",
            tool_calls=[
                call("exec", {"command": command}),
                call("write_file", {"path": "after.txt", "content": "after the approval"}, 2),
            ],
        ),
        chat_answer("All done."),
    )


def start(client: Any) -> Any:
    body = {"session_key": "chat-1", "message": "Make the file.", "user_id": "alice"}
    return client.post("/api/v1/agents/bot/runs", body, format="json")


def jobs(func: str) -> list[tuple[Any, ...]]:
    return [q.task["args"] for q in OrmQ.objects.all() if q.task["func"] == func]


def decide(client: Any, approval_id: str, decision: str, reason: str = "") -> None:
    response = client.post(
        f"/api/v1/approvals/{approval_id}/decide", {"decision": decision, "reason": reason}, format="json"
    )
    assert response.status_code == 200, response.content


def work_the_queue(tenant: Tenant, approval_id: str, capture: Any) -> None:
    """What the cluster does after a decision: the approvals job, then the run's next stretch."""
    with capture(execute=True):
        [args] = jobs("apps.policy.tasks.run_approved_call")
        assert args == (approval_id, str(tenant.pk))
        policy_tasks.run_approved_call(*args)
    [resume] = jobs("apps.runs.tasks.resume_run")
    run_tasks.resume_run(*resume)


def test_a_run_waits_for_an_approval_without_a_worker_and_goes_on_once_allowed(
    member_a, admin_a, agent, provider, fake, tenant_a, django_capture_on_commit_callbacks
):
    asks_for_exec(fake, "touch approved.txt && echo made-it")

    response = start(member_a)

    # The request came back with the run parked: nothing ran yet, the second call is kept for later.
    assert response.status_code == 202, response.content
    run = response.json()
    assert (run["status"], run["tool_calls"]) == ("waiting", 0)
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert (approval.status, approval.command, approval.wait) == (
        "pending",
        "touch approved.txt && echo made-it",
        False,
    )
    assert run["awaiting_approval"] == str(approval.pk)
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id="alice")
    assert not (ws / "approved.txt").exists()
    assert not (ws / "after.txt").exists()
    assert member_a.get(f"/api/v1/runs/{run['id']}/").json()["status"] == "waiting"
    # A waiting run counts as at work: it cannot be claimed twice or resumed before the decision.
    run_tasks.resume_run(str(tenant_a.pk), run["id"])
    assert Run.objects.for_tenant(tenant_a).get(pk=run["id"]).status == "waiting"

    with django_capture_on_commit_callbacks(execute=True):
        decide(admin_a, str(approval.pk), "allow-once")
    work_the_queue(tenant_a, str(approval.pk), django_capture_on_commit_callbacks)

    done = member_a.get(f"/api/v1/runs/{run['id']}/").json()
    assert (done["status"], done["output"], done["tool_calls"], done["awaiting_approval"]) == (
        "completed",
        "All done.",
        2,
        None,
    )
    assert (ws / "approved.txt").exists()
    assert (ws / "after.txt").read_text() == "after the approval"
    # The model read both results, in order, after the call that waited.
    last = fake.chat.requests[-1]["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "tool"]
    assert "made-it" in last[-2]["content"]
    assert last[-2]["tool_call_id"] == "call_exec_1"
    assert last[-1]["tool_call_id"] == "call_write_file_2"
    assert [c.tool for c in ToolCall.objects.for_tenant(tenant_a).order_by("created_at")] == [
        "exec",
        "write_file",
    ]
    tool_messages = SessionMessage.objects.for_tenant(tenant_a).filter(role="tool").order_by("seq")
    assert [m.tool_call_id for m in tool_messages] == ["call_exec_1", "call_write_file_2"]
    # A second resume job finds nothing to do.
    run_tasks.resume_run(str(tenant_a.pk), run["id"])
    assert len(fake.chat.requests) == 2


def test_a_denied_call_is_read_by_the_model_and_the_run_goes_on(
    member_a, admin_a, agent, provider, fake, tenant_a, django_capture_on_commit_callbacks
):
    asks_for_exec(fake, "touch denied.txt")
    run = start(member_a).json()
    approval = PendingApproval.objects.for_tenant(tenant_a).get()

    with django_capture_on_commit_callbacks(execute=True):
        decide(admin_a, str(approval.pk), "deny", "not on a Friday")
    work_the_queue(tenant_a, str(approval.pk), django_capture_on_commit_callbacks)

    done = member_a.get(f"/api/v1/runs/{run['id']}/").json()
    assert done["status"] == "completed"
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id="alice")
    assert not (ws / "denied.txt").exists()
    refused = fake.chat.requests[-1]["messages"][-2]
    assert refused["role"] == "tool"
    assert "denied by an administrator: not on a Friday" in refused["content"]


def test_cancelling_a_waiting_run_ends_it_and_denies_its_approval(
    member_a, admin_a, agent, provider, fake, tenant_a, django_capture_on_commit_callbacks
):
    asks_for_exec(fake, "touch never.txt")
    run = start(member_a).json()
    approval = PendingApproval.objects.for_tenant(tenant_a).get()

    with django_capture_on_commit_callbacks(execute=True):
        response = member_a.post(f"/api/v1/runs/{run['id']}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    approval.refresh_from_db()
    assert (approval.status, approval.decision_reason) == (
        "denied",
        "the run that asked for it was cancelled",
    )
    # The approvals job records the refusal; the run stays cancelled and the model is not asked again.
    with django_capture_on_commit_callbacks(execute=True):
        [args] = jobs("apps.policy.tasks.run_approved_call")
        policy_tasks.run_approved_call(*args)
    assert not jobs("apps.runs.tasks.resume_run")
    run_tasks.resume_run(str(tenant_a.pk), run["id"])
    assert Run.objects.for_tenant(tenant_a).get(pk=run["id"]).status == "cancelled"
    assert len(fake.chat.requests) == 1
    ws = workspace_for(tenant=tenant_a, agent=agent, user_id="alice")
    assert not (ws / "never.txt").exists()
    # Deciding it now is a conflict: it is no longer pending.
    response = admin_a.post(
        f"/api/v1/approvals/{approval.pk}/decide", {"decision": "allow-once"}, format="json"
    )
    assert response.status_code == 409


def test_an_approval_nobody_decides_times_out_and_the_run_reads_that(
    member_a, agent, provider, fake, tenant_a, settings, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    asks_for_exec(fake, "touch late.txt")
    run = start(member_a).json()
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    PendingApproval.objects.for_tenant(tenant_a).filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert policy_tasks.expire_approvals() == 1
    work_the_queue(tenant_a, str(approval.pk), django_capture_on_commit_callbacks)

    done = member_a.get(f"/api/v1/runs/{run['id']}/").json()
    assert done["status"] == "completed"
    assert fake.chat.requests[-1]["messages"][-2]["content"].startswith("approval timed out after")


def test_a_team_members_run_gets_the_post_turn_rules_when_it_ends_after_waiting(
    admin_a, agent, provider, fake, tenant_a, django_capture_on_commit_callbacks
):
    crew = make_crew(tenant_a)
    asks_for_exec(fake, "touch team.txt")
    with django_capture_on_commit_callbacks(execute=True):
        task = board.create_task(crew.team, actor=crew.as_lead, subject="Make the file", owner=crew.alice)
        task = dispatch.assign_and_dispatch(crew.team, task.pk, actor=crew.as_lead)
    [queued] = jobs("apps.runs.tasks.run_team_task")

    run_tasks.run_team_task(*queued)

    run = Run.objects.for_tenant(tenant_a).get(kind=Run.Kind.TEAM_TASK)
    assert run.status == "waiting"
    task.refresh_from_db()
    assert task.status == Task.Status.IN_PROGRESS  # no post-turn rules yet: the turn has not ended

    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    with django_capture_on_commit_callbacks(execute=True):
        decide(admin_a, str(approval.pk), "allow-once")
    work_the_queue(tenant_a, str(approval.pk), django_capture_on_commit_callbacks)

    run.refresh_from_db()
    task.refresh_from_db()
    assert run.status == "completed"
    assert (task.status, task.result) == ("completed", "All done.")


def test_a_run_that_works_too_long_on_one_worker_fails_with_the_reason(
    member_a, agent, provider, fake, monkeypatch
):
    from apps.runs import runner

    monkeypatch.setattr(runner, "slice_seconds", lambda: -1.0)
    fake.chat = scripted(chat_answer("never asked"))

    run = start(member_a).json()

    assert run["status"] == "failed"
    assert "the longest a worker may work on one run" in run["error"]
    assert not fake.chat.requests


def test_a_cancellation_asked_for_while_the_call_asks_wins_over_waiting(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    from apps.runs import runner

    asks_for_exec(fake, "touch raced.txt")
    ask = runner._call_tool

    def cancelled_meanwhile(run, actor, name, arguments):
        outcome = ask(run, actor, name, arguments)
        Run.objects.for_tenant(tenant_a).filter(pk=run.pk).update(cancel_requested=True)
        return outcome

    monkeypatch.setattr(runner, "_call_tool", cancelled_meanwhile)

    run = start(member_a).json()

    assert (run["status"], run["awaiting_approval"]) == ("cancelled", None)
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    assert (approval.status, approval.decision_reason) == (
        "denied",
        "the run that asked for it was cancelled",
    )


def test_a_resumed_run_killed_before_using_the_approved_result_goes_on_without_asking_again(
    member_a,
    admin_a,
    agent,
    provider,
    fake,
    tenant_a,
    settings,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """The run's resume job is lost (the sweep queues it again), and the worker resuming it is killed
    before the approved call's result is saved: the job that takes it over uses that result (the call is
    neither run again nor sent for approval again) and runs the next call once."""
    asks_for_exec(fake, "touch approved.txt && echo approved-once")
    run = start(member_a).json()
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    with django_capture_on_commit_callbacks(execute=True):
        decide(admin_a, str(approval.pk), "allow-once")
    with django_capture_on_commit_callbacks(execute=True):
        [args] = jobs("apps.policy.tasks.run_approved_call")
        policy_tasks.run_approved_call(*args)
    OrmQ.objects.all().delete()  # the resume job is lost
    long_ago = timezone.now() - timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    Run.objects.for_tenant(tenant_a).filter(pk=run["id"]).update(updated_at=long_ago)
    assert run_tasks.recover_runs() == 1
    [resume] = jobs("apps.runs.tasks.resume_run")
    assert resume == (str(tenant_a.pk), run["id"])

    kill_at(monkeypatch, "_tool_result", 1)  # killed as it saves the approved call's result
    with pytest.raises(Killed):
        run_tasks.resume_run(*resume)
    monkeypatch.undo()
    Run.objects.for_tenant(tenant_a).filter(pk=run["id"]).update(lease_until=long_ago)
    run_tasks.resume_run(*resume)  # delivered again: taken over

    done = Run.objects.for_tenant(tenant_a).get(pk=run["id"])
    assert (done.status, done.output, done.tool_calls, done.takeovers) == ("completed", "All done.", 2, 1)
    assert PendingApproval.objects.for_tenant(tenant_a).count() == 1
    assert [c.tool for c in ToolCall.objects.for_tenant(tenant_a).order_by("created_at")] == [
        "exec",
        "write_file",
    ]
    tool_messages = SessionMessage.objects.for_tenant(tenant_a).filter(role="tool").order_by("seq")
    assert [m.tool_call_id for m in tool_messages] == ["call_exec_1", "call_write_file_2"]
    assert "approved-once" in tool_messages[0].content
    assert len(fake.chat.requests) == 2


def test_a_run_whose_approved_calls_job_was_lost_or_killed_goes_on_with_the_reason(
    member_a,
    admin_a,
    agent,
    provider,
    fake,
    tenant_a,
    settings,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """The job that runs the approved call never ran (the sweep queues it again); then its worker is
    killed in the middle of the call (the job delivered again finds nothing to run: the call is run at
    most once): after a job's time, the run reads why the call has no result and goes on."""
    asks_for_exec(fake, "touch approved.txt && echo lost")
    run = start(member_a).json()
    approval = PendingApproval.objects.for_tenant(tenant_a).get()
    with django_capture_on_commit_callbacks(execute=True):
        decide(admin_a, str(approval.pk), "allow-once")
    OrmQ.objects.all().delete()  # the approvals job is lost
    retry, timeout = settings.Q_CLUSTER["retry"], settings.Q_CLUSTER["timeout"]

    def decided_ago(seconds: float) -> None:
        past = timezone.now() - timedelta(seconds=seconds)
        PendingApproval.objects.for_tenant(tenant_a).filter(pk=approval.pk).update(decided_at=past)
        Run.objects.for_tenant(tenant_a).filter(pk=run["id"]).update(updated_at=past)

    decided_ago(retry / 2)
    assert run_tasks.recover_runs() == 0  # its job may still come
    decided_ago(retry + 1)
    assert run_tasks.recover_runs() == 1
    [args] = jobs("apps.policy.tasks.run_approved_call")
    assert args == (str(approval.pk), str(tenant_a.pk))

    def killed(*_: Any, **__: Any) -> Any:
        raise Killed

    monkeypatch.setattr(gateway, "call", killed)
    with pytest.raises(Killed):
        policy_tasks.run_approved_call(*args)
    monkeypatch.undo()
    assert policy_tasks.run_approved_call(*args) == "nothing to run"  # delivered again: run at most once
    OrmQ.objects.all().delete()
    decided_ago(retry + 1)
    assert run_tasks.recover_runs() == 0  # the killed job's time and its delivery again are not over
    decided_ago(timeout + retry + 1)
    assert run_tasks.recover_runs() == 1
    [resume] = jobs("apps.runs.tasks.resume_run")
    with django_capture_on_commit_callbacks(execute=True):
        run_tasks.resume_run(*resume)

    done = Run.objects.for_tenant(tenant_a).get(pk=run["id"])
    assert (done.status, done.output, done.tool_calls) == ("completed", "All done.", 2)
    tool_messages = SessionMessage.objects.for_tenant(tenant_a).filter(role="tool").order_by("seq")
    assert [m.tool_call_id for m in tool_messages] == ["call_exec_1", "call_write_file_2"]
    assert tool_messages[0].content.startswith("No result: the worker running this call after its approval")
    assert [c.tool for c in ToolCall.objects.for_tenant(tenant_a)] == ["write_file"]
