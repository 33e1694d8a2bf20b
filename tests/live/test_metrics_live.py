"""``/metrics`` across real processes: a known mix of requests, tool calls, a websocket, a background
job and an approval waiting moves exactly the counters it should, as scraped from daphne, which adds
up its own metrics and the django-q2 cluster's (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django_q.tasks import async_task
from prometheus_client.parser import text_string_to_metric_families

from apps.accounts import services
from apps.policy import approval_services
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import open_socket
from tests.processes import LiveProcesses, wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TOKEN = "live-scraper-token-0123456789"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[LiveProcesses]:
    # A metrics directory of their own: the other live processes of the test run (the other xdist worker's
    # included) write theirs into the shared data directory's, and would move these counters.
    own = tmp_path / "metrics"
    own.mkdir()
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={"TOOLGATE_METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(own)},
        label="metrics-",
    )
    try:
        processes.daphne()
        processes.qcluster()
        yield processes
    finally:
        processes.stop_all()


def scrape(base_url: str) -> Samples:
    response = httpx.get(f"{base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert response.status_code == 200, response.text[:500]
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_a_mixed_workload_moves_the_counters_exactly(processes, tenant_a):
    base = processes.base_url
    actor = Actor.system(tenant_a)
    services.agent_create(actor=actor, key="bot", name="Bot")
    policy_services.policy_save(
        actor,
        policy_services.target("tenant"),
        {"deny": ["write_file"], "execApproval": {"ask": "on-miss"}},
    )
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    headers = {"Authorization": f"Bearer {member}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        # warm up (first requests of a process, schema caches) before the first scrape
        assert client.get("/api/v1/agents/").status_code == 200
        before = scrape(base)

        for _ in range(3):
            allowed = client.post(
                "/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime", "args": {}}
            )
            assert allowed.status_code == 200, allowed.text
        denied = client.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "write_file", "args": {"path": "x.txt", "content": "x"}},
        )
        assert denied.status_code == 200
        assert "not allowed by policy" in denied.text
        for _ in range(4):
            assert client.get("/api/v1/agents/").status_code == 200
        assert client.get("/api/v1/agents/bot/").status_code == 200
        assert client.get("/api/v1/agents/nobody/").status_code == 404
        # the MCP endpoint (outside Django's URLconf), refused without a key: one 4xx
        assert httpx.post(f"{base}/mcp/bot/", json={}, timeout=30).status_code == 401
        # a background job, run by the cluster (another process than daphne)
        async_task("math.floor", 2.5)

        with ThreadPoolExecutor(1) as pool, open_socket(processes.ws_url, api_key=member) as sock:
            assert sock.recv()["type"] == "hello"
            held = pool.submit(
                client.post,
                "/api/v1/runtime/execute",
                json={"agent": "bot", "tool": "exec", "args": {"command": "touch metrics-proof"}},
            )
            approval = wait_until(
                lambda: PendingApproval.objects.for_tenant(tenant_a).filter(status="pending").first(), 30
            )
            assert approval is not None
            wait_until(
                lambda: (
                    value(
                        scrape(base), "toolgate_background_jobs_total", func="math.floor", outcome="success"
                    )
                    > value(before, "toolgate_background_jobs_total", func="math.floor", outcome="success")
                ),
                30,
            )
            during = scrape(base)
            approval_services.approval_decide(
                actor=actor, approval=approval, decision="deny", reason="not now"
            )
            assert "denied" in held.result(timeout=60).text
        time.sleep(0.5)  # the socket's disconnect is handled after the close handshake
        after = scrape(base)

    # tool calls, by tool, decision and outcome; their latency histograms count the same calls
    calls = "toolgate_tool_calls_total"
    assert delta(before, after, calls, tool="datetime", decision="allowed", outcome="ok") == 3
    assert delta(before, after, calls, tool="write_file", decision="denied", outcome="error") == 1
    assert delta(before, after, calls, tool="exec", decision="approval_denied", outcome="error") == 1
    durations = "toolgate_tool_call_duration_seconds_count"
    ok = {"tool": "datetime", "decision": "allowed", "outcome": "ok"}
    assert delta(before, after, durations, **ok) == 3
    assert delta(before, after, "toolgate_tool_call_duration_seconds_sum", **ok) > 0

    # HTTP requests by route pattern (never the raw path), method and status class
    http = "toolgate_http_request_duration_seconds_count"
    execute = {"route": "api/v1/runtime/execute", "method": "POST", "status": "2xx"}
    assert delta(before, after, http, **execute) == 5
    assert delta(before, after, http, route="api/v1/agents/", method="GET", status="2xx") == 4
    one_agent = {"route": "api/v1/agents/<key>/", "method": "GET"}
    assert delta(before, after, http, **one_agent, status="2xx") == 1
    assert delta(before, after, http, **one_agent, status="4xx") == 1
    assert delta(before, after, http, route="mcp/<agent>/", method="POST", status="4xx") == 1
    assert not [key for key in after if "nobody" in str(key) or "bot/" in str(key)]

    # the websocket counts while it is open, and no more once closed
    assert delta(before, during, "toolgate_websocket_connections") == 1
    assert delta(before, after, "toolgate_websocket_connections") == 0
    assert delta(before, after, "toolgate_websocket_connections_opened_total") == 1

    # read at scrape time: the approval waiting, then decided; the cluster's job, counted in its process
    assert delta(before, during, "toolgate_approvals_waiting") == 1
    assert value(after, "toolgate_approvals_waiting") == value(before, "toolgate_approvals_waiting")
    assert delta(before, after, "toolgate_background_jobs_total", func="math.floor", outcome="success") == 1
    assert ("toolgate_background_queue_depth", frozenset()) in after
    assert value(after, "toolgate_mcp_servers", status="connected") >= 0
    assert value(after, "toolgate_db_pool_connections", state="max") >= 1
    assert value(after, "toolgate_db_pool_connections", state="size") >= 1
    assert math.isfinite(value(after, "toolgate_background_failures_stored"))
