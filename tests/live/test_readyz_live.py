"""``/readyz`` of a real daphne: ready only while a django-q2 cluster runs on the same database."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

READY_TIMEOUT = 30.0
CHECKS = {"database", "channel_layer", "q2_cluster", "jail"}


def poll_readyz(base_url: str, *, status: int, timeout: float = READY_TIMEOUT) -> dict:
    """GET /readyz until it answers ``status``; fail with the last answer after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{base_url}/readyz", timeout=10)
        except httpx.HTTPError as exc:
            last = exc
        else:
            last = (response.status_code, response.text)
            if response.status_code == status:
                body: dict = response.json()
                return body
        time.sleep(0.5)
    raise AssertionError(f"/readyz never answered {status} within {timeout:g}s; last: {last}")


def assert_all_ready(body: dict) -> None:
    """Every check passed and at least one q2 cluster is registered."""
    assert body["status"] == "ready"
    assert set(body["checks"]) == CHECKS
    assert all(check["ok"] is True for check in body["checks"].values()), body
    assert body["checks"]["q2_cluster"]["clusters"] >= 1


def test_ready_with_daphne_and_a_cluster(live: LiveProcesses) -> None:
    base_url = live.daphne()
    live.qcluster()

    body = poll_readyz(base_url, status=200)  # the cluster registers itself a few seconds after start

    assert_all_ready(body)
    # Stays ready: the channel-layer round trip (send, then receive in the same process) never hangs.
    for _ in range(20):
        again = httpx.get(f"{base_url}/readyz", timeout=10)
        assert again.status_code == 200, again.text


def test_not_ready_without_a_cluster(live: LiveProcesses) -> None:
    # The session's processes are shared: stop them all, then bring back daphne alone. Later tests
    # start whatever they need again (live.daphne() / live.qcluster() restart stopped processes).
    live.stop_all()
    base_url = live.daphne()

    body = poll_readyz(base_url, status=503)  # a stopped cluster's heartbeat expires within seconds

    assert body["status"] == "not_ready"
    assert set(body["checks"]) == CHECKS
    assert body["checks"]["q2_cluster"]["ok"] is False
    assert body["checks"]["q2_cluster"]["clusters"] == 0
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["channel_layer"]["ok"] is True
