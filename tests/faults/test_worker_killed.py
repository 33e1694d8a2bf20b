"""A django-q2 worker killed in the middle of a run (SIGKILL: no result reported, nothing cleaned up):
the queue delivers the job again ``Q_RETRY`` seconds later, and that job takes the run over once the
dead worker's lease has expired. The run ends completed, its input is in the session once, the tool call
the dead worker made is not run again, and the model is asked again with the same transcript."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from django.db import connection

from apps.accounts import services as tenant_services
from apps.audit.models import ToolCall
from apps.llm import services as llm_services
from apps.runs.models import Run
from apps.sessions.models import SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider, chat_answer, tool_call
from tests.local_http import serving
from tests.processes import LiveProcesses, wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# A short worker timeout, and the job of a killed worker delivered again soon after it.
Q_TIMEOUT, Q_RETRY = 10, 16


@pytest.fixture
def cluster(live: LiveProcesses) -> Iterator[tuple[LiveProcesses, FakeProvider]]:
    live.stop_qcluster()  # the session's cluster would take the run's job with other settings
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={
            "TOOLGATE_SSRF_ALLOW_NETS": f"{PUBLIC_IP}/32",
            "Q_TIMEOUT": str(Q_TIMEOUT),
            "Q_RETRY": str(Q_RETRY),
        },
        label="worker-killed-",
    )
    try:
        with serving(PUBLIC_IP) as server:
            yield processes, FakeProvider(server).install()
    finally:
        processes.stop_all()


def worker_asking(port: int) -> psutil.Process:
    """The cluster's process holding a connection to the provider (the worker running the run)."""
    for process in psutil.Process(os.getpid()).children(recursive=True):
        try:
            connections = process.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        if any(c.raddr and (c.raddr.ip, c.raddr.port) == (PUBLIC_IP, port) for c in connections):
            return process
    raise AssertionError("no process of the cluster is connected to the provider")


def test_a_worker_killed_mid_run_is_taken_over_and_nothing_is_done_twice(cluster, settings, tenant_a):
    processes, fake = cluster
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    system = Actor.system(tenant_a)
    tenant_services.tenant_update(actor=system, changes={"settings": {"runner": "builtin"}})
    tenant_services.agent_create(actor=system, key="bot", name="Bot")
    llm_services.provider_create(
        actor=system, name="main", base_url=fake.base_url, api_key=KEY, models={"chat": "fake-chat"}
    )
    requests: list[dict[str, Any]] = []
    asked_again, release = threading.Event(), threading.Event()

    def chat(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if len(requests) == 1:
            return chat_answer("", tool_calls=[tool_call("datetime", {"timezone": "UTC"})])
        if len(requests) == 2:  # the worker is killed while it waits for this answer
            asked_again.set()
            release.wait(timeout=60)
        return chat_answer("It is noon.")

    fake.chat = chat
    processes.qcluster()
    client = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))
    created = client.post(
        "/api/v1/agents/bot/runs",
        {"session_key": "killed", "message": "What time is it?", "wait": False},
        format="json",
    )
    assert created.status_code == 202, created.content
    run_id = created.json()["id"]

    try:
        assert asked_again.wait(timeout=40), "the run never asked the model a second time"
        worker = worker_asking(fake.server.port)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        killed_at = time.monotonic()
    finally:
        release.set()
    run = Run.objects.for_tenant(tenant_a).get(pk=run_id)
    assert (run.status, run.tool_calls) == ("running", 1)

    run = wait_until(
        lambda: Run.objects.for_tenant(tenant_a).filter(pk=run_id).exclude(status="running").first(),
        timeout=Q_RETRY + 30,
    )
    assert time.monotonic() - killed_at < Q_RETRY + 30
    assert (run.status, run.output, run.error) == ("completed", "It is noon.", "")
    assert (run.tool_calls, run.iterations, run.takeovers) == (1, 2, 1)
    assert (run.lease_until, run.lease_token) == (None, None)

    # The input is in the session once, the tool call was run once, and the answer ends the transcript.
    messages = list(
        SessionMessage.objects.for_tenant(tenant_a)
        .filter(session__key="killed")
        .order_by("seq")
        .values_list("role", "name", "content")
    )
    assert [(role, name) for role, name, _ in messages] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "datetime"),
        ("assistant", ""),
    ]
    assert (messages[0][2], messages[-1][2]) == ("What time is it?", "It is noon.")
    assert ToolCall.objects.for_tenant(tenant_a).filter(tool="datetime").count() == 1

    # The model was asked three times: the call, the answer the killed worker never read, and the same
    # question again from the job that took the run over, with the same transcript.
    assert len(requests) == 3
    assert [m["role"] for m in requests[1]["messages"]] == ["system", "user", "assistant", "tool"]
    assert requests[2]["messages"] == requests[1]["messages"]
