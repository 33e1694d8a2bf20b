"""Runs with real processes: an external runner takes a run from the runs topic on daphne's websocket,
works it through the API and reports its end; a spawned subagent runs on a real django-q2 cluster
against the scripted provider and its result is announced to the parent's session."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from apps.llm import services as llm_services
from apps.runs.models import Run
from apps.sessions.models import Session, SessionMessage
from apps.tenants import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import event_of, open_socket
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider, chat_answer
from tests.local_http import serving
from tests.processes import LiveProcesses

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


@pytest.fixture
def provider_processes(django_db_setup: None) -> Iterator[tuple[LiveProcesses, FakeProvider]]:
    """A django-q2 cluster allowed to reach the scripted provider on 127.0.0.2, and the provider."""
    from django.db import connection

    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={"TOOLGATE_SSRF_ALLOW_NETS": f"{PUBLIC_IP}/32"},
        label="runs-",
    )
    try:
        with serving(PUBLIC_IP) as server:
            yield processes, FakeProvider(server).install()
    finally:
        processes.stop_all()


def wait_until(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout:g}s")


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
