"""Approval expiry on a real daphne, with no django-q2 cluster (so no sweep): an approval whose call does
not wait is timed out by the process that asked, at its expiry, and the inbox hears it at once."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import event_of, open_socket
from tests.policy.test_approvals_api import on_miss
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
TIMEOUT_SECONDS = 2


@pytest.fixture
def web() -> Iterator[str]:
    """A daphne of its own whose approvals expire after two seconds."""
    from django.db import connection

    env = {"TOOLGATE_APPROVAL_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS)}
    with LiveProcesses(db_name=connection.settings_dict["NAME"], extra_env=env, label="expiry-") as processes:
        yield processes.daphne()


def test_an_approval_nobody_waits_for_is_timed_out_at_its_expiry_and_the_inbox_told(web, tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    on_miss(tenant_a)
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    admin = factories.make_api_key(tenant_a, Role.ADMIN)
    ws_url = web.replace("http://", "ws://") + "/ws/events/"
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(open_socket(ws_url, api_key=admin))
        assert sock.recv()["type"] == "hello"
        sock.subscribe(["approvals"])
        with httpx.Client(base_url=web, timeout=30) as api:
            asked_at = time.monotonic()
            response = api.post(
                "/api/v1/runtime/execute",
                headers={"Authorization": f"Bearer {member}"},
                json={
                    "agent": "bot",
                    "tool": "exec",
                    "args": {"command": "touch late"},
                    "context": {"wait": False},
                },
            )
            assert response.status_code == 202, response.text
            approval_id = response.json()["approval_id"]

            expired = sock.wait_for(
                lambda m: event_of(m, topic="approvals", type="approval.timed_out"), timeout=15
            )
            elapsed = time.monotonic() - asked_at
            assert expired["event"]["data"]["id"] == approval_id
            assert expired["event"]["data"]["status"] == "timed_out"
            # At its expiry, not a sweep's minute later (no cluster runs here at all).
            assert TIMEOUT_SECONDS - 0.5 <= elapsed < TIMEOUT_SECONDS + 5, elapsed

            admin_headers = {"Authorization": f"Bearer {admin}"}
            assert api.get("/api/v1/approvals/?status=pending", headers=admin_headers).json()["results"] == []
            decided = api.post(
                f"/api/v1/approvals/{approval_id}/decide",
                headers=admin_headers,
                json={"decision": "allow-once"},
            )
            assert decided.status_code == 409, decided.text
            assert decided.json()["error"]["code"] == "approval_expired"
