"""Runs with real processes: an external runner takes a run from the runs topic on daphne's websocket,
works it through the API and reports its end; a spawned subagent runs on a real django-q2 cluster
against the scripted provider and its result is announced to the parent's session; a team task assigned
through the API is worked by its member's run on the cluster (the board's events arrive on the team's
topic), and a blocker that fails the task while the run waits on the model cancels the run."""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.llm import services as llm_services
from apps.runs.models import Run
from apps.sessions.models import Session, SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider, chat_answer
from tests.processes import LiveProcesses, wait_until
from tests.teams.conftest import Crew, make_crew

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_an_external_runner_takes_a_run_from_the_websocket(live, daphne, sockets, tenant_a):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    raw = factories.make_api_key(tenant_a, Role.MEMBER)
    client = factories.key_client(raw)
    sock = sockets.enter_context(open_socket(live.ws_url, api_key=raw))
    assert sock.recv()["type"] == "hello"
    sock.subscribe(["runs"])

    created = client.post(
        "/api/v1/agents/bot/runs",
        {"session_key": "ext-1", "message": "What time is it?", "runner": "external", "wait": False},
        format="json",
    )
    assert created.status_code == 202, created.content
    run_id = created.json()["id"]

    announced = sock.wait_for(lambda m: event_of(m, topic="runs", type="run.created", id=run_id))["event"][
        "data"
    ]
    assert (announced["runner"], announced["input"], announced["session_key"]) == (
        "external",
        "What time is it?",
        "ext-1",
    )
    assert client.post(f"/api/v1/runs/{run_id}/claim").json()["status"] == "running"
    sock.wait_for(lambda m: event_of(m, topic="runs", type="run.started", id=run_id))
    tool = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "datetime", "args": {}, "context": {"session_key": "ext-1"}},
        format="json",
    ).json()
    assert tool["is_error"] is False
    session = Session.objects.for_tenant(tenant_a).get(key="ext-1")
    client.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        {"role": "assistant", "content": "It is noon."},
        format="json",
    )
    finished = client.post(
        f"/api/v1/runs/{run_id}/finish",
        {"status": "completed", "output": "It is noon.", "tool_calls": 1},
        format="json",
    )
    assert finished.json()["status"] == "completed"
    done = sock.wait_for(lambda m: event_of(m, topic="runs", type="run.finished", id=run_id))["event"]["data"]
    assert (done["status"], done["tool_calls"]) == ("completed", 1)


def test_a_spawned_subagent_runs_on_the_cluster_and_is_announced(provider_processes, settings, tenant_a):
    processes, fake = provider_processes
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    system = Actor.system(tenant_a)
    tenant_services.tenant_update(actor=system, changes={"settings": {"runner": "builtin"}})
    tenant_services.agent_create(actor=system, key="bot", name="Bot")
    llm_services.provider_create(
        actor=system, name="main", base_url=fake.base_url, api_key=KEY, models={"chat": "fake-chat"}
    )
    fake.chat = lambda request: chat_answer(f"Found: {request['messages'][-1]['content']}")
    client = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    processes.qcluster()

    answer = client.post(
        "/api/v1/runtime/execute",
        {
            "agent": "bot",
            "tool": "spawn",
            "args": {"task": "the capital of France", "label": "geo"},
            "context": {"session_key": "main"},
        },
        format="json",
    ).json()
    assert answer["is_error"] is False, answer

    run = wait_until(
        lambda: Run.objects.for_tenant(tenant_a).filter(kind="subagent", status="completed").first()
    )
    assert run.output == "Found: the capital of France"
    parent = Session.objects.for_tenant(tenant_a).get(key="main")
    message = wait_until(lambda: SessionMessage.objects.for_tenant(tenant_a).filter(session=parent).first())
    assert (message.name, message.source) == ("subagents", "subagent:announce")
    assert "“geo” completed]\nFound: the capital of France" in message.content


def team_call(action: str, task_id: str, **args: Any) -> dict[str, Any]:
    return {
        "id": f"call_{action}",
        "type": "function",
        "function": {
            "name": "team_tasks",
            "arguments": json.dumps({"action": action, "task_id": task_id, **args}),
        },
    }


def api_client(base_url: str, raw_key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=30)


def team_setup(
    processes: LiveProcesses, fake: FakeProvider, tenant: Tenant, sockets: contextlib.ExitStack
) -> tuple[Crew, httpx.Client, EventSocket]:
    """The cluster and daphne started, tenant A's built-in runner set through the API, its provider, a
    crew, a member's API client on daphne and a viewer's socket subscribed to the team's topic."""
    processes.qcluster()
    base_url = processes.daphne()
    crew = make_crew(tenant)
    llm_services.provider_create(
        actor=Actor.system(tenant),
        name="main",
        base_url=fake.base_url,
        api_key=KEY,
        models={"chat": "fake-chat"},
    )
    with api_client(base_url, factories.make_api_key(tenant, Role.ADMIN)) as admin:
        changed = admin.patch("/api/v1/tenant/", json={"settings": {"runner": "builtin"}})
        assert changed.status_code == 200, changed.text
    sock = sockets.enter_context(
        open_socket(processes.ws_url, api_key=factories.make_api_key(tenant, Role.VIEWER))
    )
    assert sock.recv()["type"] == "hello"
    sock.subscribe([f"team:{crew.team.pk}"])
    member = sockets.enter_context(api_client(base_url, factories.make_api_key(tenant, Role.MEMBER)))
    return crew, member, sock


def test_a_team_task_dispatched_through_the_api_is_worked_on_the_cluster(
    provider_processes, settings, tenant_a, sockets
):
    processes, fake = provider_processes
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    crew, member, sock = team_setup(processes, fake, tenant_a, sockets)
    tasks = f"/api/v1/teams/{crew.team.pk}/tasks/"
    created = member.post(tasks, json={"subject": "Write the report"})
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    requests: list[dict[str, Any]] = []

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if len(requests) == 1:
            return chat_answer("", tool_calls=[team_call("progress", task_id, percent=50, step="Drafting")])
        return chat_answer("The report is written.")

    fake.chat = chat

    assigned = member.post(f"{tasks}{task_id}/assign", json={"agent": crew.alice.key})
    assert assigned.status_code == 200, assigned.text
    assert assigned.json()["status"] == "in_progress"

    topic = f"team:{crew.team.pk}"
    done = sock.wait_for(lambda m: event_of(m, topic=topic, type="task.completed", id=task_id))["event"]
    assert (done["data"]["status"], done["data"]["event"]["actor_id"]) == ("completed", "post_turn")
    seen = [e["type"] for e in sock.events() if e["topic"] == topic and e["data"].get("id") == task_id]
    assert seen == ["task.created", "task.assigned", "task.dispatched", "task.progress", "task.completed"]
    dispatched, progress = (
        next(e for e in sock.events() if e["type"] == kind) for kind in ("task.dispatched", "task.progress")
    )
    assert dispatched["data"]["dispatch"]["agent"] == crew.alice.key
    assert (progress["data"]["event"]["actor_id"], progress["data"]["event"]["data"]) == (
        crew.alice.key,
        {"progress_percent": 50, "progress_step": "Drafting"},
    )

    # the run's answer completed the task (the member did not complete it through the tool)
    task = member.get(f"{tasks}{task_id}/").json()
    assert (task["status"], task["result"]) == ("completed", "The report is written.")
    runs = member.get("/api/v1/runs/", params={"agent": crew.alice.key}).json()["results"]
    assert [(r["kind"], r["status"], r["tool_calls"], r["session_key"]) for r in runs] == [
        ("team_task", "completed", 1, f"team-task:{task_id}")
    ]
    assert f"#{task['number']}" in requests[0]["messages"][-1]["content"]  # the dispatch's message
    assert requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_progress",
        "content": "Progress updated: 50% Drafting",
    }


def test_a_blocker_that_fails_the_task_cancels_its_working_run(
    provider_processes, settings, tenant_a, sockets
):
    processes, fake = provider_processes
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    crew, member, sock = team_setup(processes, fake, tenant_a, sockets)
    tasks = f"/api/v1/teams/{crew.team.pk}/tasks/"
    created = member.post(tasks, json={"subject": "Analyse the data"})
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    asked, answer = threading.Event(), threading.Event()

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        answer.wait(timeout=30)  # the model thinks until the test has failed the task
        # an answer that calls a tool: the runner looks for a cancel before each call
        return chat_answer("", tool_calls=[team_call("progress", task_id, percent=90)])

    fake.chat = chat
    sockets.callback(answer.set)

    assert member.post(f"{tasks}{task_id}/assign", json={"agent": crew.alice.key}).status_code == 200
    assert asked.wait(timeout=30), "the member's run never asked the model"
    [run] = member.get("/api/v1/runs/", params={"agent": crew.alice.key}).json()["results"]
    assert (run["status"], run["session_key"]) == ("running", f"team-task:{task_id}")

    blocked = member.post(
        f"{tasks}{task_id}/comment", json={"text": "No access to the data.", "type": "blocker"}
    )
    assert blocked.status_code == 201, blocked.text
    assert (blocked.json()["failed"], blocked.json()["task"]["status"]) == (True, "failed")
    working = member.get(f"/api/v1/runs/{run['id']}/").json()
    assert (working["status"], working["cancel_requested"]) == ("running", True)
    answer.set()

    def ended_run() -> dict[str, Any] | None:
        found: dict[str, Any] = member.get(f"/api/v1/runs/{run['id']}/").json()
        return found if found["finished_at"] else None

    ended = wait_until(ended_run, timeout=30)
    assert (ended["status"], ended["error"], ended["tool_calls"]) == ("cancelled", "cancelled", 0)
    topic = f"team:{crew.team.pk}"
    cancel = sock.wait_for(lambda m: event_of(m, topic=topic, type="run.cancel", task=task_id))["event"]
    assert cancel["data"]["agent"] == crew.alice.key
    task = member.get(f"{tasks}{task_id}/").json()
    assert (task["status"], task["result"]) == ("failed", "FAILED: Blocked: No access to the data.")
    assert "progress" not in [e["event_type"] for e in task["events"]]  # the answer's call never ran
