"""The load balancer's quota gate (``deploy/images/haproxy/haproxy.cfg``, run by a real HAProxy in front of
a real daphne): once Toolgate refuses a key for its tenant's ``api_requests_per_minute``, HAProxy answers
that key's next requests itself until the Retry-After Toolgate gave (at most 10 s), with the same error,
without reaching daphne; another tenant's key passes; a quota raised with ``set_quota`` applies through
the gate within those 10 s."""

from __future__ import annotations

import time
from io import StringIO

import httpx
import pytest
from django.core.management import call_command

from apps.tenants.roles import Role
from bench.load_balancer import load_balancer
from tests import factories
from tests.processes import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_the_gate_answers_a_key_over_its_quota_without_reaching_the_web_process(live, tenant_a, tenant_b):
    call_command("set_quota", "tenant-a", "api_requests_per_minute", "3", stdout=StringIO())
    key_a = factories.make_api_key(tenant_a, Role.VIEWER)
    key_b = factories.make_api_key(tenant_b, Role.VIEWER)
    daphne = live.daphne().removeprefix("http://")

    with load_balancer([daphne]) as base, httpx.Client(base_url=base, timeout=30) as client:

        def me(key: str) -> httpx.Response:
            return client.get("/api/v1/me/", headers={"Authorization": f"Bearer {key}"})

        assert [me(key_a).status_code for _ in range(3)] == [200, 200, 200]
        by_toolgate = me(key_a)
        assert by_toolgate.status_code == 429
        assert by_toolgate.headers["x-toolgate-quota"] == "api_requests_per_minute"
        assert "x-toolgate-gate" not in by_toolgate.headers
        told = int(by_toolgate.headers["retry-after"])

        by_gate = [me(key_a) for _ in range(20)]

        for response in by_gate:  # answered by HAProxy's own rule: never forwarded to daphne
            assert response.status_code == 429
            assert response.headers["x-toolgate-gate"] == "load-balancer"
            wait = int(response.headers["retry-after"])
            assert 1 <= wait <= min(told, 10) + 1
            error = response.json()["error"]
            assert error["code"] == "quota_exceeded"
            assert error["details"] == {"quota": "api_requests_per_minute", "retry_after": wait}
            assert f"retry in {wait} s" in error["message"]
        assert me(key_b).status_code == 200  # another tenant passes

        # A raised quota applies through the gate within its 10 s at most.
        started = time.monotonic()
        call_command("set_quota", "tenant-a", "api_requests_per_minute", "1000", stdout=StringIO())
        wait_until(lambda: me(key_a).status_code == 200, timeout=20)
        assert time.monotonic() - started < 12
