"""Quotas hold across processes: daphne and this test process share one tenant's windows and counts, so
requests split between them, even at the same moment, never pass a limit; a quota raised with
``set_quota`` in this process applies in daphne at once, without a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import connections

from apps.accounts import services as accounts
from apps.mcp_grants import services as mcp_services
from apps.memory import indexing
from apps.runs import services as run_services
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.live_servers import stdio_fields
from tests.processes import LiveProcesses, wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def set_quota(name: str, value: str) -> None:
    call_command("set_quota", "tenant-a", name, value, stdout=StringIO())


def here(make: Any) -> int:
    """Run ``make`` in this process, on a thread's own database connection: 1 when it was allowed, 0
    when a quota refused it."""
    try:
        make()
        return 1
    except ServiceError as exc:
        if exc.code != "quota_exceeded":
            raise
        return 0
    finally:
        connections.close_all()


def there(response: httpx.Response) -> int:
    """The same for a request to daphne."""
    if response.status_code in (200, 201, 202):
        return 1
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "quota_exceeded"
    return 0


def _there_with(call: Any, remote: httpx.Client) -> int:
    return there(call(remote))


def test_rate_quotas_hold_across_processes_and_a_raise_applies_without_a_restart(live, daphne, tenant_a):
    system = Actor.system(tenant_a)
    accounts.agent_create(actor=system, key="bot", name="Bot")
    raw = factories.make_api_key(tenant_a, Role.MEMBER)
    local = factories.key_client(raw)
    set_quota("tool_calls_per_minute", "4")
    body = {"agent": "bot", "tool": "datetime", "args": {}}
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {raw}"}, timeout=30) as remote:
        errors = []
        for turn in range(6):  # daphne and this process in turn
            if turn % 2 == 0:
                answer: Any = remote.post("/api/v1/runtime/execute", json=body)
            else:
                answer = local.post("/api/v1/runtime/execute", body, format="json")
            errors.append(answer.json()["is_error"])
        assert errors == [False, False, False, False, True, True]
        set_quota("tool_calls_per_minute", "6")
        assert remote.post("/api/v1/runtime/execute", json=body).json()["is_error"] is False

        set_quota("api_requests_per_minute", "5")
        statuses = [remote.get("/api/v1/me/").status_code for _ in range(3)]
        statuses += [local.get("/api/v1/me/").status_code for _ in range(3)]
        # Every request of the tenant counts, the executes above included: the window is already full.
        assert 429 in statuses
        assert statuses[-1] == 429
        refused = remote.get("/api/v1/me/")
        assert refused.status_code == 429
        assert refused.json()["error"]["details"]["quota"] == "api_requests_per_minute"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        set_quota("api_requests_per_minute", "0")
        # daphne answers a tenant it refused at its front gate for up to a second before it reads the
        # tenant's limit again (apps/runtime/quota_limits.py): the raise applies within that second.
        raised = time.monotonic()
        wait_until(lambda: remote.get("/api/v1/me/").status_code == 200, timeout=5)
        assert time.monotonic() - raised < 3


def test_count_quotas_hold_when_two_processes_create_at_the_same_moment(live, daphne, tenant_a):
    system = Actor.system(tenant_a)
    agent = accounts.agent_create(actor=system, key="bot", name="Bot")
    raw = factories.make_api_key(tenant_a, Role.ADMIN)
    headers = {"Authorization": f"Bearer {raw}"}
    pool = ThreadPoolExecutor(max_workers=8)

    def race(remote_calls: list[Any], local_calls: list[Any]) -> int:
        with httpx.Client(base_url=daphne, headers=headers, timeout=60) as remote:
            futures = [pool.submit(_there_with, call, remote) for call in remote_calls]
            futures += [pool.submit(here, call) for call in local_calls]
            return sum(f.result() for f in futures)

    # agents: 1 exists, the limit is 4, six are asked for at once: exactly three more are made.
    set_quota("agents", "4")
    made = race(
        [lambda c, i=i: c.post("/api/v1/agents/", json={"key": f"r{i}", "name": "r"}) for i in range(3)],
        [lambda i=i: accounts.agent_create(actor=system, key=f"l{i}", name="l") for i in range(3)],
    )
    assert made == 3
    rows = factories.key_client(raw).get("/api/v1/tenant/quota").json()["quotas"]
    assert {row["name"]: row["used"] for row in rows}["agents"] == 4

    # MCP servers: limit 2, four at once.
    set_quota("mcp_servers", "2")
    made = race(
        [
            lambda c, i=i: c.post("/api/v1/mcp/servers/", json={"name": f"r{i}", **stdio_fields()})
            for i in range(2)
        ],
        [
            lambda i=i: mcp_services.server_create(actor=system, name=f"l{i}", **stdio_fields())
            for i in range(2)
        ],
    )
    assert made == 2

    # Concurrent runs: limit 2, four started at once (none is worked: no cluster runs them).
    set_quota("concurrent_runs", "2")
    body = {"message": "Hi", "user_id": "alice", "wait": False}
    made = race(
        [
            lambda c, i=i: c.post("/api/v1/agents/bot/runs", json={**body, "session_key": f"r{i}"})
            for i in range(2)
        ],
        [
            lambda i=i: run_services.run_create(
                actor=system, agent=agent, session_key=f"l{i}", message="Hi", user_id="alice"
            )
            for i in range(2)
        ],
    )
    assert made == 2

    # Memory chunks: limit 3 with 2 indexed; a two-chunk document is refused in daphne too.
    set_quota("memory_chunks", "3")
    two = "# One\n\nfirst part\n\n# Two\n\nsecond part\n"
    with httpx.Client(base_url=daphne, headers=headers, timeout=60) as remote:
        first = remote.put("/api/v1/agents/bot/memory/MEMORY.md", json={"content": two})
        assert first.status_code == 201
        assert indexing.index_document(tenant=tenant_a, document_id=first.json()["id"]) == "indexed"
        refused = remote.put("/api/v1/agents/bot/memory/memory/b.md", json={"content": two})
        assert there(refused) == 0
        set_quota("memory_chunks", "4")
        assert there(remote.put("/api/v1/agents/bot/memory/memory/b.md", json={"content": two})) == 1
    pool.shutdown()


@pytest.fixture
def quick_measure(live: LiveProcesses, settings: Any) -> Iterator[str]:
    """daphne measuring workspaces every second, as this process does during the test."""
    settings.TOOLGATE_WORKSPACE_MEASURE_SECONDS = 1
    env = {"TOOLGATE_WORKSPACE_MEASURE_SECONDS": "1"}
    with LiveProcesses(db_name=live.db_name, extra_env=env, label="measure-") as processes:
        yield processes.daphne()


def test_workspace_bytes_hold_across_processes_and_a_raise_applies(quick_measure, tenant_a):
    accounts.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    raw = factories.make_api_key(tenant_a, Role.MEMBER)
    local = factories.key_client(raw)
    set_quota("workspace_bytes", "1000")

    def write(client: Any, path: str, size: int) -> dict[str, Any]:
        body = {"agent": "bot", "tool": "write_file", "args": {"path": path, "content": "x" * size}}
        if isinstance(client, httpx.Client):
            return dict(client.post("/api/v1/runtime/execute", json=body).json())
        return dict(client.post("/api/v1/runtime/execute", body, format="json").json())

    with httpx.Client(
        base_url=quick_measure, headers={"Authorization": f"Bearer {raw}"}, timeout=30
    ) as remote:
        assert write(remote, "big.txt", 1500)["is_error"] is False  # daphne writes past the quota
        time.sleep(1.2)  # the measurement either process made before the write has lapsed
        here_refused = write(local, "more.txt", 10)  # this process sees what daphne wrote
        assert here_refused["is_error"] is True
        assert "workspace_bytes" in here_refused["for_llm"]
        there_refused = write(remote, "more.txt", 10)
        assert there_refused["is_error"] is True
        assert "workspace_bytes" in there_refused["for_llm"]
        set_quota("workspace_bytes", "100000")  # applies at once: the limit is read from the tenant row
        assert write(remote, "more.txt", 10)["is_error"] is False
        assert write(local, "again.txt", 10)["is_error"] is False
