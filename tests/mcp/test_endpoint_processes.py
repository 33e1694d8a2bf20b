"""The MCP endpoint across daphne processes: stateless, so any process serves any request, and an
exec call held open in one process is decided through the REST API of another (or times out)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from apps.toolkit.workspace import workspace_for
from tests import factories
from tests.mcp.endpoint_client import CALL_DATETIME, INITIALIZE, call_tool, endpoint, post, rest, text
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TIMEOUT_SECONDS = 3


@pytest.fixture(scope="module")
def second(live: LiveProcesses) -> Iterator[str]:
    """Another daphne on the same database, with a short approval timeout."""
    processes = LiveProcesses(
        db_name=live.db_name,
        extra_env={"TOOLGATE_APPROVAL_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS)},
        label="mcp-second-",
    )
    try:
        yield processes.daphne()
    finally:
        processes.stop_all()


@pytest.fixture
def setup(tenant_a: Tenant) -> tuple[Agent, str, str]:
    agent = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    return agent, factories.make_api_key(tenant_a, Role.MEMBER), factories.make_api_key(tenant_a, Role.ADMIN)


def ask_on_miss(base: str, admin: str) -> None:
    with rest(base, admin) as client:
        response = client.put(
            "/api/v1/policy/tenant/", json={"document": {"execApproval": {"ask": "on-miss"}}}
        )
    assert response.status_code == 200, response.text


def test_requests_of_one_client_are_served_by_any_process(live: Any, second, tenant_a, setup):
    _, member, _ = setup
    first = live.daphne()
    assert post(endpoint(first), INITIALIZE, key=member).status_code == 200
    answered = post(endpoint(second), CALL_DATETIME, key=member)  # no session to carry over
    assert answered.status_code == 200, answered.text
    assert '"isError":false' in answered.text
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "allowed"


def test_a_call_held_in_one_process_is_approved_through_another(live: Any, second, tenant_a, setup):
    agent, member, admin = setup
    first = live.daphne()
    ask_on_miss(first, admin)
    workspace = workspace_for(tenant=tenant_a, agent=agent, user_id="")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            call_tool, endpoint(second), member, "exec", {"command": "touch across && echo across"}
        )
        deadline = time.monotonic() + 30
        while not (pending := PendingApproval.objects.for_tenant(tenant_a).filter(status="pending").first()):
            assert time.monotonic() < deadline, "no approval was requested"
            time.sleep(0.05)
        with rest(first, admin) as client:
            decided = client.post(f"/api/v1/approvals/{pending.pk}/decide", json={"decision": "allow-once"})
        assert decided.status_code == 200, decided.text
        result = waiting.result(timeout=TIMEOUT_SECONDS + 30)
    assert not result.is_error, text(result)
    assert "across" in text(result)
    assert (workspace / "across").exists()


def test_a_call_nobody_decides_times_out_as_an_error_result(second, tenant_a, setup):
    agent, member, admin = setup
    ask_on_miss(second, admin)
    started = time.monotonic()
    result = call_tool(endpoint(second), member, "exec", {"command": "touch never"})
    assert time.monotonic() - started >= TIMEOUT_SECONDS
    assert result.is_error
    assert text(result) == f"approval timed out after {TIMEOUT_SECONDS}s"
    assert not (workspace_for(tenant=tenant_a, agent=agent, user_id="") / "never").exists()
    assert PendingApproval.objects.for_tenant(tenant_a).get().status == "timed_out"
    assert ToolCall.objects.for_tenant(tenant_a).get().decision == "approval_denied"
