"""Discovery of a server that is down when registered is tried again with backoff until it succeeds,
without an admin's action; the server's status shows the failed attempts and the next try, and a newer
registration, an edit, a disabling or a deletion drops the retries pending. The django-q2 cluster's part
(its scheduler turning a due schedule into a queued job, a worker running the queued jobs) is played by
:func:`run_queue`, on a real streamable-HTTP MCP server."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django_q.brokers import get_broker
from django_q.models import OrmQ, Schedule
from django_q.scheduler import scheduler

from apps.mcp_grants import tasks
from apps.mcp_grants.models import MCPServer
from apps.tenants.roles import Role
from tests import factories
from tests.dashboard.personas import login
from tests.mcp.live_servers import ALLOW_NETS, free_port, http_server, url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

SERVERS = "/api/v1/mcp/servers/"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def run_queue() -> list[bool]:
    """What a django-q2 cluster does: the scheduler queues the due schedules, a worker runs the queued
    discovery jobs (the recurring jobs of other apps are left out)."""
    scheduler(broker=get_broker())
    outcomes = []
    for queued in OrmQ.objects.order_by("id"):
        task = queued.task
        queued.delete()
        if task["func"] == tasks.FUNC:
            outcomes.append(tasks.discover(*task["args"], **task["kwargs"]))
    return outcomes


def when(iso: str) -> datetime:
    found = parse_datetime(iso)
    assert found is not None
    return found


def wait_until_due(retry_at: str) -> None:
    while time.time() <= when(retry_at).timestamp() + 0.05:
        time.sleep(0.05)


@pytest.fixture
def short_retries(settings):  # type: ignore[no-untyped-def]
    settings.TOOLGATE_SSRF_ALLOW_NETS = ALLOW_NETS
    settings.TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS = 0.3
    settings.TOOLGATE_MCP_DISCOVERY_RETRY_MAX_SECONDS = 0.5


def test_a_server_down_at_registration_is_discovered_once_it_is_up(admin_a, tenant_a, short_retries):
    port = free_port()
    body = {"name": "late", "transport": "streamable-http", "url": url("streamable-http", port)}
    ok(admin_a.post(SERVERS, body, format="json"), 201)

    assert run_queue() == [False]
    first = ok(admin_a.get(SERVERS + "late/"))
    assert first["status"] == "error"
    assert first["discovery_failures"] == 1
    assert first["discovery_retry_at"] is not None
    assert first["last_health"]["next_try_at"]
    assert first["last_health"]["discovery_failures"] == 1
    assert run_queue() == []  # not due yet

    wait_until_due(first["discovery_retry_at"])
    assert run_queue() == [False]  # still down: tried again, later
    second = ok(admin_a.get(SERVERS + "late/"))
    assert second["discovery_failures"] == 2
    page = login(factories.make_user(tenant_a, Role.MEMBER, email="m@a.test"))
    for path in (reverse("dashboard:mcp_servers"), reverse("dashboard:mcp_server", args=[second["id"]])):
        html = page.get(path).content.decode()
        assert "Discovery failed 2 times; next try" in html, path
    assert when(second["discovery_retry_at"]) > when(first["discovery_retry_at"])

    with http_server("streamable-http", port):
        wait_until_due(second["discovery_retry_at"])
        assert run_queue() == [True]
    found = ok(admin_a.get(SERVERS + "late/"))
    assert (found["status"], found["discovery_failures"], found["discovery_retry_at"]) == (
        "connected",
        0,
        None,
    )
    tools = ok(admin_a.get(SERVERS + "late/tools/"))
    names = {t["name"] for t in (tools["results"] if isinstance(tools, dict) else tools)}
    assert {"echo", "pid", "sleep"} <= names
    assert not Schedule.objects.filter(name=tasks.retry_schedule_name(found["id"])).exists()
    assert run_queue() == []
    assert "Discovery failed" not in page.get(reverse("dashboard:mcp_servers")).content.decode()


def test_an_edit_a_disabling_or_a_deletion_drops_pending_retries(admin_a, tenant_a, short_retries):
    body = {"name": "late", "transport": "streamable-http", "url": url("streamable-http", free_port())}
    created = ok(admin_a.post(SERVERS, body, format="json"), 201)
    assert run_queue() == [False]
    server = MCPServer.objects.for_tenant(tenant_a).get(pk=created["id"])
    stale = (str(tenant_a.pk), created["id"], server.discovery_generation, server.discovery_failures)

    ok(admin_a.patch(SERVERS + "late/", {"url": url("streamable-http", free_port())}, format="json"))
    edited = ok(admin_a.get(SERVERS + "late/"))
    assert (edited["discovery_failures"], edited["discovery_retry_at"]) == (0, None)
    assert not Schedule.objects.filter(name=tasks.retry_schedule_name(created["id"])).exists()
    assert tasks.discover(*stale) is False  # a retry of the old registration does nothing
    assert ok(admin_a.get(SERVERS + "late/"))["discovery_failures"] == 0
    assert run_queue() == [False]  # the edit's own discovery, which schedules its retry
    assert Schedule.objects.filter(name=tasks.retry_schedule_name(created["id"])).count() == 1

    ok(admin_a.patch(SERVERS + "late/", {"enabled": False}, format="json"))
    assert not Schedule.objects.filter(name=tasks.retry_schedule_name(created["id"])).exists()
    assert ok(admin_a.get(SERVERS + "late/"))["discovery_retry_at"] is None
    ok(admin_a.patch(SERVERS + "late/", {"enabled": True}, format="json"))
    assert run_queue() == [False]
    assert Schedule.objects.filter(name=tasks.retry_schedule_name(created["id"])).count() == 1
    ok(admin_a.delete(SERVERS + "late/"), 204)
    assert not Schedule.objects.filter(name=tasks.retry_schedule_name(created["id"])).exists()
