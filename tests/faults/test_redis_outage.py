"""Redis gone while ``REDIS_URL`` is set (channel layer and cache on Redis): readiness says so, the API
answers clearly (never a 500), and everything recovers by itself when Redis is back, without a restart
of Toolgate: readiness, execute, and live events to a socket that stayed open."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses, wait_until
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_processes(live: LiveProcesses, own_redis: RedisServer) -> Iterator[LiveProcesses]:
    live.stop_all()  # the session's PostgreSQL-layer processes would take this test's jobs
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"], extra_env={"REDIS_URL": own_redis.url}, label="redis-out-"
    )
    try:
        yield processes
    finally:
        processes.stop_all()


def test_redis_down_is_reported_answered_clearly_and_recovered_from(redis_processes, own_redis, tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    raw = factories.make_api_key(tenant_a, Role.OWNER)
    redis_processes.qcluster()
    base = redis_processes.daphne()
    web = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {raw}"}, timeout=30)
    body = {"agent": "bot", "tool": "datetime", "args": {"timezone": "UTC"}}

    def readyz() -> httpx.Response:
        return httpx.get(f"{base}/readyz", timeout=30)

    # The cluster registers a few seconds after its start.
    wait_until(lambda: readyz().status_code == 200, timeout=30)
    assert web.post("/api/v1/runtime/execute", json=body).status_code == 200
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(open_socket(redis_processes.ws_url, api_key=raw))
        hello = sock.recv()
        assert hello["type"] == "hello"
        assert hello["replay"] is False  # a client is told that what it misses is not sent again
        sock.subscribe(["agents"])

        own_redis.pause()
        down = wait_until(lambda: (r := readyz()).status_code == 503 and r, timeout=30)
        assert down.json()["checks"]["channel_layer"]["ok"] is False, down.json()
        for _ in range(5):
            response = web.post("/api/v1/runtime/execute", json=body)
            assert response.status_code < 500 or response.status_code == 503, response.text
            if response.status_code == 503:
                assert response.json()["error"]["message"], response.text
        listing = web.get("/api/v1/agents/")
        assert listing.status_code in (200, 503), listing.text

        own_redis.resume()
        try:
            wait_until(lambda: readyz().status_code == 200, timeout=60)
        except AssertionError:
            raise AssertionError(readyz().text) from None
        assert web.post("/api/v1/runtime/execute", json=body).status_code == 200
        created = web.post("/api/v1/agents/", json={"key": "after", "name": "After"})
        assert created.status_code == 201, created.text
        sock.wait_for(lambda m: event_of(m, topic="agents", type="agent.created"), timeout=30)
    web.close()
