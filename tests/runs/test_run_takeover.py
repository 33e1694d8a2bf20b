"""A run whose worker stopped in the middle of it (killed: nothing after the kill happens) is taken over
by the job delivered again once the worker's lease has expired, and goes on from what is saved: the
input is not added again, no tool call with a result is run again, a saved answer ends the run. A live
lease is left alone; a run taken over too often fails with the reason; the sweep queues again the work
of runs whose job was lost; a team task's job delivered again goes on with its run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from apps.audit.models import ToolCall
from apps.runs import runner, tasks, teamwork
from apps.runs.models import CronFiring, CronJob, Run
from apps.sessions.models import SessionMessage
from apps.teams.models import Task
from tests.llm.fake_provider import chat_answer, scripted
from tests.llm.fake_provider import tool_call as call
from tests.runs.test_cron import cron
from tests.runs.test_team_runs import assigned, builtin_runner, team_call
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


class Killed(BaseException):
    """The worker's process ends here: nothing after it runs, the open transaction is lost."""


def queue(client) -> str:
    created = client.post(
        "/api/v1/agents/bot/runs",
        {"session_key": "chat-1", "message": "What time is it?", "user_id": "alice", "wait": False},
        format="json",
    )
    assert created.status_code == 202, created.content
    return str(created.json()["id"])


def kill_at(monkeypatch, name: str, when: int) -> None:
    """The worker is killed the ``when``-th time it enters ``runner.<name>``."""
    original = getattr(runner, name)
    seen = {"n": 0}

    def entered(*args: Any, **kwargs: Any) -> Any:
        seen["n"] += 1
        if seen["n"] == when:
            raise Killed
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, name, entered)


def killed_run(monkeypatch, tenant, run_id: str) -> Run:
    with pytest.raises(Killed):
        runner.execute(run_id, tenant.pk)
    monkeypatch.undo()
    run = Run.objects.for_tenant(tenant).get(pk=run_id)
    assert run.status == Run.Status.RUNNING
    assert run.lease_until is not None
    assert run.lease_until > timezone.now()
    return run


def expire(run: Run, seconds: float = 1) -> None:
    Run.objects.for_tenant(run.tenant).filter(pk=run.pk).update(
        lease_until=timezone.now() - timedelta(seconds=seconds)
    )


def transcript(tenant) -> list[tuple[str, str]]:
    return list(SessionMessage.objects.for_tenant(tenant).order_by("seq").values_list("role", "tool_call_id"))


def test_a_run_killed_between_two_tool_calls_goes_on_without_running_the_first_again(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    fake.chat = scripted(
        chat_answer("", tool_calls=[call("datetime", {}), call("datetime", {"timezone": "UTC"}, 2)]),
        chat_answer("It is noon."),
    )
    run_id = queue(member_a)
    kill_at(monkeypatch, "_call_tool", 2)  # killed as it starts the second call
    run = killed_run(monkeypatch, tenant_a, run_id)
    assert (run.tool_calls, ToolCall.objects.for_tenant(tenant_a).count()) == (1, 1)

    runner.execute(run_id, tenant_a.pk)  # delivered again while the lease lives: nothing is done
    assert Run.objects.for_tenant(tenant_a).get(pk=run_id).status == Run.Status.RUNNING
    assert len(fake.chat.requests) == 1

    expire(run)
    runner.execute(run_id, tenant_a.pk)  # delivered again after the lease: taken over
    run = Run.objects.for_tenant(tenant_a).get(pk=run_id)
    assert (run.status, run.output, run.tool_calls, run.iterations, run.takeovers) == (
        "completed",
        "It is noon.",
        2,
        2,
        1,
    )
    assert ToolCall.objects.for_tenant(tenant_a).count() == 2
    assert transcript(tenant_a) == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "call_datetime_1"),
        ("tool", "call_datetime_2"),
        ("assistant", ""),
    ]
    assert len(fake.chat.requests) == 2
    sent = fake.chat.requests[1]["messages"]
    assert [(m["role"], m.get("tool_call_id", "")) for m in sent[1:]] == transcript(tenant_a)[:4]


def test_a_run_killed_after_its_answer_was_saved_ends_with_it_without_asking_again(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    fake.chat = scripted(chat_answer("It is noon."))
    run_id = queue(member_a)
    kill_at(monkeypatch, "_finish", 1)
    run = killed_run(monkeypatch, tenant_a, run_id)
    expire(run)
    runner.execute(run_id, tenant_a.pk)
    run = Run.objects.for_tenant(tenant_a).get(pk=run_id)
    assert (run.status, run.output, run.takeovers) == ("completed", "It is noon.", 1)
    assert len(fake.chat.requests) == 1
    assert transcript(tenant_a) == [("user", ""), ("assistant", "")]


def test_a_run_killed_before_its_input_was_saved_adds_it_once(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    fake.chat = scripted(chat_answer("Hello."))
    run_id = queue(member_a)
    kill_at(monkeypatch, "_append", 1)
    run = killed_run(monkeypatch, tenant_a, run_id)
    expire(run)
    runner.execute(run_id, tenant_a.pk)
    assert Run.objects.for_tenant(tenant_a).get(pk=run_id).status == "completed"
    assert transcript(tenant_a) == [("user", ""), ("assistant", "")]


def test_the_old_worker_stops_at_its_next_step_once_taken_over(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    """A worker that was only slow (its lease expired) finds the run taken over at its next step, and
    changes nothing."""
    fake.chat = scripted(chat_answer("", tool_calls=[call("datetime", {})]), chat_answer("It is noon."))
    ask = runner._ask

    def slow(run: Run, *args: Any, **kwargs: Any) -> Any:
        answer = ask(run, *args, **kwargs)
        if run.takeovers == 0 and len(fake.chat.requests) == 1:
            # While this worker waited for the answer, its lease expired and another job took over.
            expire(run)
            runner.execute(run.pk, tenant_a.pk)
        return answer

    monkeypatch.setattr(runner, "_ask", slow)
    run_id = queue(member_a)
    runner.execute(run_id, tenant_a.pk)
    run = Run.objects.for_tenant(tenant_a).get(pk=run_id)
    assert (run.status, run.output, run.takeovers) == ("completed", "It is noon.", 1)
    assert ToolCall.objects.for_tenant(tenant_a).count() == 0  # the slow worker's call never ran
    assert transcript(tenant_a) == [("user", ""), ("assistant", "")]


def test_a_run_taken_over_too_often_fails_with_the_reason(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    fake.chat = scripted(chat_answer("It is noon."))
    run_id = queue(member_a)
    kill_at(monkeypatch, "_ask", 1)
    run = killed_run(monkeypatch, tenant_a, run_id)
    Run.objects.for_tenant(tenant_a).filter(pk=run_id).update(takeovers=runner.MAX_TAKEOVERS)
    expire(run)
    runner.execute(run_id, tenant_a.pk)
    run = Run.objects.for_tenant(tenant_a).get(pk=run_id)
    assert run.status == "failed"
    assert run.error == (
        f"the run's worker stopped in the middle of it {runner.MAX_TAKEOVERS + 1} times (killed, or its "
        "machine went down); start a new run to go on"
    )
    assert fake.chat.requests == []


def queued_jobs() -> list[tuple[str, tuple[Any, ...]]]:
    return [(q.task["func"], tuple(q.task["args"])) for q in OrmQ.objects.order_by("id")]


def test_the_sweep_queues_again_the_work_of_runs_whose_job_was_lost(
    member_a, agent, provider, fake, tenant_a, monkeypatch, settings
):
    fake.chat = scripted(chat_answer("It is noon."))
    lost = queue(member_a)
    kill_at(monkeypatch, "_ask", 1)
    run = killed_run(monkeypatch, tenant_a, lost)
    OrmQ.objects.all().delete()  # the queue gave up on its job
    retry = settings.Q_CLUSTER["retry"]

    expire(run, retry / 2)  # expired, but its job may still be delivered again: left to it
    assert tasks.recover_runs() == 0
    expire(run, retry + 1)
    assert tasks.recover_runs() == 1
    assert queued_jobs() == [("apps.runs.tasks.execute_run", (str(tenant_a.pk), lost))]
    assert tasks.recover_runs() == 0  # queued once per Q_RETRY
    runner.execute(lost, tenant_a.pk)  # the worker takes it over
    assert Run.objects.for_tenant(tenant_a).get(pk=lost).status == "completed"

    # A queued run whose job never reached the queue is queued again.
    OrmQ.objects.all().delete()
    never = queue(member_a)
    OrmQ.objects.all().delete()
    Run.objects.for_tenant(tenant_a).filter(pk=never).update(
        updated_at=timezone.now() - timedelta(seconds=retry + 1)
    )
    assert tasks.recover_runs() == 1
    assert queued_jobs() == [("apps.runs.tasks.execute_run", (str(tenant_a.pk), never))]


def test_a_team_tasks_job_delivered_again_goes_on_with_its_run(
    tenant_a, provider, fake, monkeypatch, django_capture_on_commit_callbacks
):
    builtin_runner(tenant_a)
    crew = make_crew(tenant_a)
    holder: dict[str, str] = {}

    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if len(requests) == 1:
            return chat_answer("", tool_calls=[team_call("progress", task_id=holder["id"], percent=50)])
        return chat_answer("The report is written.")

    fake.chat = chat
    with django_capture_on_commit_callbacks(execute=True):
        task = assigned(crew)
    holder["id"] = str(task.pk)
    [args] = [tuple(q.task["args"]) for q in OrmQ.objects.all()]

    kill_at(monkeypatch, "_ask", 2)  # killed while asking the model after the progress call
    with pytest.raises(Killed):
        teamwork.run_task(*args)
    monkeypatch.undo()
    [run] = Run.objects.for_tenant(tenant_a).filter(kind=Run.Kind.TEAM_TASK)
    assert (run.status, run.task_id, run.tool_calls) == ("running", task.pk, 1)

    same = teamwork.run_task(*args)  # delivered again while the lease lives: nothing is done
    assert same is not None
    assert (same.pk, same.status) == (run.pk, "running")
    expire(run)
    again = teamwork.run_task(*args)  # delivered again after the lease: the same run, taken over
    assert again is not None
    assert again.pk == run.pk
    assert Run.objects.for_tenant(tenant_a).filter(kind=Run.Kind.TEAM_TASK).count() == 1
    assert (again.status, again.tool_calls, again.takeovers) == ("completed", 1, 1)
    task = Task.objects.for_tenant(tenant_a).get(pk=task.pk)
    assert (task.status, task.result) == ("completed", "The report is written.")
    assert len(requests) == 2  # the call, then the answer asked for by the job that took the run over


def test_a_scheduled_firing_delivered_again_takes_its_killed_run_over(
    member_a, agent, provider, fake, tenant_a, monkeypatch
):
    fake.chat = scripted(chat_answer("", tool_calls=[call("datetime", {})]), chat_answer("The report."))
    cron(member_a, action="create", name="report", schedule="every 5m", message="Summarise the day.")
    job_id = str(CronJob.objects.for_tenant(tenant_a).get().pk)
    kill_at(monkeypatch, "_ask", 2)  # killed while asking the model after the tool call
    with pytest.raises(Killed):
        tasks.fire_cron(str(tenant_a.pk), job_id)
    monkeypatch.undo()
    [run] = Run.objects.for_tenant(tenant_a).all()
    assert (run.status, run.tool_calls) == ("running", 1)

    tasks.fire_cron(str(tenant_a.pk), job_id)  # delivered again while the lease lives: nothing is done
    assert Run.objects.for_tenant(tenant_a).get().status == "running"
    expire(run)
    tasks.fire_cron(str(tenant_a.pk), job_id)  # delivered again after the lease: the run is taken over
    [run] = Run.objects.for_tenant(tenant_a).all()
    assert (run.status, run.output, run.tool_calls, run.takeovers) == ("completed", "The report.", 1, 1)
    assert ToolCall.objects.for_tenant(tenant_a).filter(tool="datetime").count() == 1
    assert len(fake.chat.requests) == 2
    firings = list(
        CronFiring.objects.for_tenant(tenant_a).order_by("created_at").values_list("status", "run")
    )
    assert firings == [("started", run.pk), ("skipped", None), ("skipped", None)]
