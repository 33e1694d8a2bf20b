"""Team tasks run by the built-in runner: a dispatched task is worked and completed by its member's run,
and a blocker the member raises fails the task and cancels the run; with the default external runner,
dispatches only go to the team's topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django_q.models import OrmQ

from apps.accounts import services as tenant_services
from apps.runs import teamwork
from apps.runs.models import Run
from apps.teams import board, dispatch
from apps.teams.models import Task
from apps.tenants.actors import Actor
from tests.llm.fake_provider import chat_answer
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


def team_call(action: str, n: int = 1, **args: Any) -> dict[str, Any]:
    return {
        "id": f"call_{action}_{n}",
        "type": "function",
        "function": {"name": "team_tasks", "arguments": json.dumps({"action": action, **args})},
    }


def builtin_runner(tenant) -> None:
    tenant_services.tenant_update(actor=Actor.system(tenant), changes={"settings": {"runner": "builtin"}})


def assigned(crew, subject: str = "Write the report") -> Task:
    task = board.create_task(crew.team, actor=crew.as_lead, subject=subject, owner=crew.alice)
    return dispatch.assign_and_dispatch(crew.team, task.pk, actor=crew.as_lead)


def test_a_dispatched_task_is_worked_and_completed_by_the_members_run(
    tenant_a, provider, fake, django_capture_on_commit_callbacks
):
    builtin_runner(tenant_a)
    crew = make_crew(tenant_a)
    requests: list[dict[str, Any]] = []
    task_holder: dict[str, str] = {}

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if len(requests) == 1:
            return chat_answer(
                "",
                tool_calls=[
                    team_call("complete", task_id=task_holder["id"], result="The report is written.")
                ],
            )
        return chat_answer("I completed the task.")

    fake.chat = chat
    with django_capture_on_commit_callbacks(execute=True):
        task = assigned(crew)
    task_holder["id"] = str(task.pk)
    queued = [q.task["args"] for q in OrmQ.objects.all()]
    assert [args[:2] for args in queued] == [(str(tenant_a.pk), str(task.pk))]

    run = teamwork.run_task(*queued[0])  # what the worker does with the queued job

    assert run is not None
    assert (run.kind, run.status, run.tool_calls, run.agent.key) == (
        "team_task",
        "completed",
        1,
        crew.alice.key,
    )
    assert run.session.key == f"team-task:{task.pk}"
    assert f"#{task.number}" in requests[0]["messages"][-1]["content"]  # the dispatch's message
    task = Task.objects.for_tenant(tenant_a).get(pk=task.pk)
    assert (task.status, task.result) == ("completed", "The report is written.")


def test_a_blocker_fails_the_task_and_cancels_the_run(
    tenant_a, provider, fake, django_capture_on_commit_callbacks
):
    builtin_runner(tenant_a)
    crew = make_crew(tenant_a)
    requests: list[dict[str, Any]] = []
    task_holder: dict[str, str] = {}

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return chat_answer(
            "",
            tool_calls=[
                team_call(
                    "comment", task_id=task_holder["id"], type="blocker", text="No access to the data."
                ),
                team_call("progress", 2, task_id=task_holder["id"], percent=50),
            ],
        )

    fake.chat = chat
    with django_capture_on_commit_callbacks(execute=True):
        task = assigned(crew)
    task_holder["id"] = str(task.pk)
    [job] = [q.task["args"] for q in OrmQ.objects.all()]

    run = teamwork.run_task(*job)

    assert run is not None
    assert run.status == "cancelled"
    assert run.tool_calls == 1  # stopped before the second call of the same answer
    assert len(requests) == 1
    task = Task.objects.for_tenant(tenant_a).get(pk=task.pk)
    assert task.status == "failed"
    assert task.result.startswith("FAILED: Blocked: No access to the data.")


def test_with_the_external_runner_nothing_is_queued(tenant_a, django_capture_on_commit_callbacks):
    crew = make_crew(tenant_a)
    with django_capture_on_commit_callbacks(execute=True):
        assigned(crew)
    assert not OrmQ.objects.exists()
    assert not Run.objects.for_tenant(tenant_a).exists()


def test_the_runner_setting_is_validated(owner_a):
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"runner": "robot"}}, format="json")
    assert response.status_code == 400
    assert "runner" in json.dumps(response.json())
