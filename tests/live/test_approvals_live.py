"""Exec approvals across real processes: an execute held open in daphne while a human decides.

The decision is made in this process (another process than daphne): it reaches the waiting request
through the PostgreSQL channel layer. While calls wait, the same daphne keeps serving other requests,
even with more calls waiting than its database pool has connections.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from apps.accounts import services
from apps.policy import services as policy_services
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import event_of, open_socket

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# More calls waiting than the daphne process has pooled database connections (DATABASE_POOL_MAX_SIZE 10).
WAITING = 12


def api(base_url: str, raw_key: str, timeout: float = 60) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=timeout)


def execute(base_url: str, raw_key: str, command: str) -> tuple[httpx.Response, float]:
    with api(base_url, raw_key) as client:
        response = client.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "exec", "args": {"command": command}},
        )
    return response, time.monotonic()


def wait_pending(tenant, count: int, timeout: float = 30) -> list[PendingApproval]:
    deadline = time.monotonic() + timeout
    while True:
        rows = list(
            PendingApproval.objects.for_tenant(tenant).filter(status="pending").order_by("created_at")
        )
        if len(rows) >= count:
            return rows
        assert time.monotonic() < deadline, f"{len(rows)} of {count} approvals arrived"
        time.sleep(0.05)


@pytest.fixture
def setup(tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    policy_services.policy_save(
        Actor.system(tenant_a), policy_services.target("tenant"), {"execApproval": {"ask": "on-miss"}}
    )
    return factories.make_api_key(tenant_a, Role.MEMBER), factories.make_api_key(tenant_a, Role.ADMIN)


def test_a_held_execute_completes_with_the_result_once_decided_elsewhere(live, daphne, tenant_a, setup):
    member, admin = setup
    with open_socket(live.ws_url, api_key=admin) as sock, ThreadPoolExecutor(WAITING + 1) as pool:
        assert sock.recv()["type"] == "hello"
        sock.subscribe(["approvals"])
        held = pool.submit(execute, daphne, member, "touch live-proof && echo decided-elsewhere")
        others = [pool.submit(execute, daphne, member, f"touch other-{i}") for i in range(WAITING - 1)]

        # the approval is pushed live to the inbox
        pushed = sock.wait_for(lambda m: event_of(m, topic="approvals", type="approval.requested"))
        assert pushed["event"]["data"]["agent"] == "bot"
        approvals = wait_pending(tenant_a, WAITING)
        target = next(a for a in approvals if "live-proof" in a.command)

        # while all of them wait, the same daphne answers other requests, promptly
        with api(daphne, member, timeout=10) as client:
            for _ in range(5):
                started = time.monotonic()
                me = client.get("/api/v1/me/")
                assert me.status_code == 200
                assert time.monotonic() - started < 2.0
            quick = client.post(
                "/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime", "args": {}}
            )
            assert quick.status_code == 200
            assert quick.json()["is_error"] is False
        assert not held.done()

        # decided here, in another process than daphne (the API of this process, committed)
        decided_at = time.monotonic()
        decider = factories.key_client(admin)
        response = decider.post(
            f"/api/v1/approvals/{target.pk}/decide", {"decision": "allow-once"}, format="json"
        )
        assert response.status_code == 200, response.content

        result, finished_at = held.result(timeout=30)
        assert result.status_code == 200
        body = result.json()
        assert body["is_error"] is False, body
        assert "decided-elsewhere" in body["for_llm"]
        assert body["call_id"] == target.call_id
        # woken by the channel layer, well before the database re-check (every 2 s) would have noticed
        assert finished_at - decided_at < 1.5

        for other in PendingApproval.objects.for_tenant(tenant_a).filter(status="pending"):
            decider.post(f"/api/v1/approvals/{other.pk}/decide", {"decision": "deny"}, format="json")
        for future in others:
            refused, _ = future.result(timeout=30)
            assert refused.json()["is_error"] is True
            assert "denied" in refused.json()["for_llm"]


def test_a_call_that_did_not_wait_is_run_by_the_worker_after_the_decision(live, daphne, tenant_a, setup):
    member, admin = setup
    live.qcluster()
    with api(daphne, member) as client:
        asked = client.post(
            "/api/v1/runtime/execute",
            json={
                "agent": "bot",
                "tool": "exec",
                "args": {"command": "touch by-worker && echo ran-in-the-worker"},
                "context": {"wait": False},
            },
        )
    assert asked.status_code == 202, asked.content
    approval_id = asked.json()["approval_id"]

    with api(daphne, admin) as client:
        assert (
            client.post(
                f"/api/v1/approvals/{approval_id}/decide", json={"decision": "allow-once"}
            ).status_code
            == 200
        )
        deadline = time.monotonic() + 60
        while True:
            detail = client.get(f"/api/v1/approvals/{approval_id}/").json()
            if detail["result"] is not None:
                break
            assert time.monotonic() < deadline, "the worker never ran the approved call"
            time.sleep(0.2)
        calls = client.get("/api/v1/tool-calls/", params={"tool": "exec"}).json()["results"]
    assert detail["status"] == "allowed"
    assert detail["result"]["is_error"] is False
    assert "ran-in-the-worker" in detail["result"]["for_llm"]
    assert [c["id"].replace("-", "") for c in calls] == [asked.json()["call_id"]]
