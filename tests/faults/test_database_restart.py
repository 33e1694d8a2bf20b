"""PostgreSQL restarted under load: a real daphne on a standalone PostgreSQL server (not the suite's
embedded one), eight clients executing tools. While the server is down every request fails fast with
503 and a clear message; once it is back, requests succeed again without a restart of Toolgate, and no
tool call that was answered is lost, and none is half-written."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.pg_server import StandalonePostgres
from tests.processes import BASE_DIR, LiveProcesses

pytestmark = pytest.mark.live

DB = "toolgate_fault"
SEED = """
from apps.accounts import services
from apps.tenants.actors import Actor
tenant = services.tenant_create(slug="fault", name="Fault")
# Driven as hard as the server goes: its rate quotas are off.
off = {"tool_calls_per_minute": 0, "api_requests_per_minute": 0}
tenant.__class__.objects.filter(pk=tenant.pk).update(quotas=off)
services.agent_create(actor=Actor.system(tenant), key="bot", name="Bot")
_, raw = services.api_key_create(actor=Actor.system(tenant), name="load", role="member")
print(raw)
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[StandalonePostgres, LiveProcesses, str]]:
    pg = StandalonePostgres().init()
    pg.start()
    pg.create_database(DB)
    env = {"DATABASE_URL": pg.url(DB), "TOOLGATE_DB_NAME": DB, "TOOLGATE_DATA_DIR": str(tmp_path / "data")}
    processes = LiveProcesses(db_name=DB, extra_env=env, label="dbfault-")
    run = {"cwd": BASE_DIR, "env": processes.env(), "check": True, "capture_output": True, "text": True}
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], timeout=300, **run)  # type: ignore[call-overload]
    key = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SEED], timeout=120, **run
    ).stdout.strip()  # type: ignore[call-overload]
    processes.daphne()
    try:
        yield pg, processes, key.splitlines()[-1]
    finally:
        processes.stop_all()
        pg.remove()


def test_a_database_restart_under_load_fails_fast_with_503_and_recovers(server):
    pg, processes, key = server
    url = f"{processes.base_url}/api/v1/runtime/execute"
    body = {"agent": "bot", "tool": "datetime", "args": {"timezone": "UTC"}}
    results: list[tuple[float, float, int, Any]] = []  # started, took, status, body
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    response = http.post(url, json=body)
                    answer = response.json() if response.content else None
                    results.append((started, time.monotonic() - started, response.status_code, answer))
                except httpx.HTTPError as error:
                    results.append((started, time.monotonic() - started, 0, repr(error)))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    down_at = time.monotonic()
    pg.stop("fast")
    time.sleep(4)
    up_at = time.monotonic()
    pg.start()
    time.sleep(8)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    before = [r for r in results if r[0] < down_at - 0.5]
    during = [r for r in results if down_at + 0.5 < r[0] and r[0] + r[1] < up_at]
    after = [r for r in results if r[0] > up_at + 4]
    assert before
    assert all(r[2] == 200 for r in before), before[:3]
    assert during, "no request was answered while the database was down"
    for _started, took, status, answer in during:
        assert status == 503, (status, answer)
        assert answer["error"]["code"] == "database_unavailable", answer
        assert "database" in answer["error"]["message"].lower()
        assert took < 3, f"a request took {took:.1f}s to fail while the database was down"
    assert after
    assert all(r[2] == 200 for r in after), [r for r in after if r[2] != 200][:3]

    answered = sum(1 for r in results if r[2] == 200)
    failed = sum(1 for r in results if r[2] != 200)
    with psycopg.connect(pg.url(DB)) as conn:
        rows, unfinished = conn.execute(  # type: ignore[misc]
            "SELECT count(*), count(*) FILTER (WHERE status = '' OR decision = '') FROM audit_toolcall"
        ).fetchone()
    assert answered <= rows <= answered + failed, (answered, rows, failed)
    assert unfinished == 0
