"""Suspending a tenant on real processes: daphne holds its websocket and its MCP server's connection, a
django-q2 cluster parks its run on an approval; ``suspend_tenant``, run from this process, closes the
socket, cancels the run and stops the MCP server's processes, refuses its key everywhere, and leaves
another tenant alone. ``resume_tenant`` undoes it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from io import StringIO
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from websockets.exceptions import ConnectionClosed, InvalidStatus

from apps.accounts import services as tenant_services
from apps.llm import services as llm_services
from apps.mcp_grants import services as mcp_services
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.runs.models import Run
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.conftest import cluster_with_provider
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider, chat_answer
from tests.mcp.live_servers import stdio_fields, stdio_server_pids
from tests.processes import LiveProcesses, wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def processes(live: LiveProcesses) -> Iterator[tuple[LiveProcesses, FakeProvider]]:
    """daphne and a one-worker cluster that may reach the scripted provider, checking MCP connections
    every second (a suspended tenant's are dropped at the next check)."""
    with cluster_with_provider(
        live, label="suspend-", TOOLGATE_MCP_HEALTH_SECONDS="1", Q_WORKERS="1"
    ) as started:
        yield started


def asks_to_exec(request: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "exec", "arguments": json.dumps({"command": "touch made.txt"})},
    }
    return chat_answer("", tool_calls=[call])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def hello(sock: EventSocket) -> EventSocket:
    assert sock.recv()["type"] == "hello"
    return sock


def test_suspension_stops_a_waiting_run_an_mcp_server_and_a_websocket_and_resume_undoes_it(
    processes, settings, sockets, tenant_a, tenant_b
):
    started, fake = processes
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    llm_services.provider_create(
        actor=system, name="main", base_url=fake.base_url, api_key=KEY, models={"chat": "fake-chat"}
    )
    policy_services.policy_save(
        system, policy_services.target("tenant"), {"execApproval": {"security": "full", "ask": "on-miss"}}
    )
    fake.chat = asks_to_exec
    server = mcp_services.server_create(actor=system, name="demo", **stdio_fields())
    mcp_services.agent_grant_set(actor=system, server=server, agent=agent)
    raw_a = factories.make_api_key(tenant_a, Role.MEMBER)
    raw_b = factories.make_api_key(tenant_b, Role.MEMBER)
    base = started.daphne()
    started.qcluster()

    api_a = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {raw_a}"}, timeout=60)
    api_b = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {raw_b}"}, timeout=60)
    with api_a, api_b:

        def execute_pid() -> httpx.Response:
            return api_a.post(
                "/api/v1/runtime/execute", json={"agent": "bot", "tool": "mcp_demo__pid", "args": {}}
            )

        first = wait_until(lambda: (r := execute_pid()).status_code == 200 and not r.json()["is_error"] and r)
        assert first.json()["for_llm"]
        servers = wait_until(stdio_server_pids)
        sock_a = hello(sockets.enter_context(open_socket(started.ws_url, api_key=raw_a)))
        sock_a.subscribe(["runs"])
        sock_b = hello(sockets.enter_context(open_socket(started.ws_url, api_key=raw_b)))
        sock_b.subscribe(["runs"])

        body = {"session_key": "s-exec", "message": "Run it.", "user_id": "alice", "wait": False}
        response = api_a.post("/api/v1/agents/bot/runs", json=body)
        assert response.status_code == 202, response.text
        run_id = response.json()["id"]
        parked = sock_a.wait_for(
            lambda m: event_of(m, topic="runs", type="run.waiting", id=run_id), timeout=60
        )
        approval_id = parked["event"]["data"]["approval"]

        out = StringIO()
        call_command("suspend_tenant", "tenant-a", "--reason", "maintenance", stdout=out)
        assert "1 runs cancelled" in out.getvalue()

        # The socket says why, then closes.
        said = sock_a.wait_for(lambda m: m.get("type") == "error", timeout=15)
        assert said["code"] == "tenant_suspended"
        assert "maintenance" in said["message"]
        with pytest.raises(ConnectionClosed) as closed:
            sock_a.wait_for(lambda m: False, timeout=15)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 4403
        # The run is cancelled and its approval can no longer let the call run.
        assert Run.objects.for_tenant(tenant_a).get(pk=run_id).status == Run.Status.CANCELLED
        assert PendingApproval.objects.for_tenant(tenant_a).get(pk=approval_id).status != "pending"
        # Every process drops the tenant's MCP connections at its next health check: the servers exit.
        wait_until(lambda: not any(alive(pid) for pid in servers), timeout=30)
        # The key is refused everywhere, with the reason; a new socket is refused.
        refused = api_a.get("/api/v1/me/")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "tenant_suspended"
        mcp = api_a.post(
            "/mcp/bot/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
        )
        assert mcp.status_code == 403
        assert "maintenance" in mcp.text
        with pytest.raises(InvalidStatus), open_socket(started.ws_url, api_key=raw_a):
            pass
        # The other tenant is untouched: its socket is open and its key works.
        assert api_b.get("/api/v1/me/").status_code == 200
        assert sock_b.request({"type": "subscribe", "topics": ["agents"]})["type"] == "subscribed"

        call_command("resume_tenant", "tenant-a", stdout=StringIO())
        assert api_a.get("/api/v1/me/").status_code == 200
        hello(sockets.enter_context(open_socket(started.ws_url, api_key=raw_a)))
        again = wait_until(lambda: (r := execute_pid()).status_code == 200 and not r.json()["is_error"] and r)
        assert again.json()["for_llm"] != first.json()["for_llm"]  # a new server process
        assert [pid for pid in stdio_server_pids() if pid not in servers and alive(pid)]
        assert Run.objects.for_tenant(tenant_a).get(pk=run_id).status == Run.Status.CANCELLED


@pytest.fixture
def slow_health(live: LiveProcesses) -> Iterator[str]:
    """daphne and a cluster that check their MCP connections only hourly: what stops a server there at
    once can only be the suspension's own sweep of this host's jails."""
    env = {"TOOLGATE_MCP_HEALTH_SECONDS": "3600"}
    with LiveProcesses(db_name=live.db_name, extra_env=env, label="slow-health-") as processes:
        base = processes.daphne()
        processes.qcluster()  # discovers the servers' tools
        yield base


def test_suspension_kills_the_tenants_jails_on_this_host_at_once(slow_health, tenant_a, tenant_b):
    clients = {}
    servers: dict[str, list[int]] = {}
    for tenant in (tenant_a, tenant_b):
        system = Actor.system(tenant)
        agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
        server = mcp_services.server_create(actor=system, name="demo", **stdio_fields())
        mcp_services.agent_grant_set(actor=system, server=server, agent=agent)
        raw = factories.make_api_key(tenant, Role.MEMBER)
        client = httpx.Client(base_url=slow_health, headers={"Authorization": f"Bearer {raw}"}, timeout=60)
        clients[tenant.slug] = client
        before = set(stdio_server_pids())

        def called(client: httpx.Client = client) -> bool:
            answer = client.post(
                "/api/v1/runtime/execute", json={"agent": "bot", "tool": "mcp_demo__pid", "args": {}}
            )
            return answer.status_code == 200 and not answer.json()["is_error"]

        wait_until(called)
        servers[tenant.slug] = wait_until(
            lambda before=before: [p for p in stdio_server_pids() if p not in before]
        )
    try:
        out = StringIO()
        started = time.monotonic()
        call_command("suspend_tenant", "tenant-a", stdout=out)

        # daphne's server and the cluster's (its discovery keeps a connection) alike
        assert re.search(r"[1-9]\d* jails stopped on this host", out.getvalue())
        wait_until(lambda: not any(alive(pid) for pid in servers["tenant-a"]), timeout=5)
        assert time.monotonic() - started < 5  # daphne's next health check is an hour away
        assert all(alive(pid) for pid in servers["tenant-b"])
        answer = clients["tenant-b"].post(
            "/api/v1/runtime/execute", json={"agent": "bot", "tool": "mcp_demo__pid", "args": {}}
        )
        assert answer.json()["is_error"] is False
        assert all(alive(pid) for pid in servers["tenant-b"])  # the same server answered
    finally:
        for client in clients.values():
            client.close()
