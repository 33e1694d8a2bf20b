"""MCP servers across real processes: the qcluster discovers a new server's tools, a daphne process
holds the connection and calls through it, and what the processes must agree on (tools, status) is in
the database: this process sees daphne's connection reported, lost and reconnected."""

from __future__ import annotations

import time

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.live_servers import DEMO_TOOLS, kill_stdio_servers, stdio_fields

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def wait_for(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_discovered_by_the_worker_called_through_daphne_recovered_after_a_crash(tenant_a, live, daphne):
    live.qcluster()
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="bot", name="Bot")
    server = services.server_create(actor=system, name="demo", **stdio_fields())
    services.agent_grant_set(actor=system, server=server, agent=agent)

    tools = MCPServerTool.objects.for_tenant(tenant_a).filter(server=server)
    wait_for(lambda: tools.count() == len(DEMO_TOOLS), "the worker discovers the tools of a new server")
    # The job stores the tools, then the status: a moment apart.
    wait_for(
        lambda: MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == "connected",
        "the worker records the server as connected",
    )

    key = factories.make_api_key(tenant_a, Role.MEMBER)
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:

        def call(tool: str) -> dict:
            response = api.post("/api/v1/runtime/execute", json={"agent": "bot", "tool": tool, "args": {}})
            assert response.status_code == 200, response.text
            return response.json()

        listed = api.get("/api/v1/agents/bot/tools", params={"format": "mcp"}).json()["tools"]
        assert "mcp_demo__counter" in {t["name"] for t in listed}
        assert [call("mcp_demo__counter")["for_llm"] for _ in range(3)] == ["1", "2", "3"]
        pid = call("mcp_demo__pid")["for_llm"]
        assert kill_stdio_servers() >= 1  # ours, and any server an earlier test left dying
        failed = call("mcp_demo__pid")
        assert failed["is_error"]
        row = MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk)
        assert row.status == "disconnected", row.last_health
        wait_for(
            lambda: MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == "connected",
            "daphne reconnects in the background and reports it",
        )
        again = call("mcp_demo__pid")
        assert not again["is_error"]
        assert again["for_llm"] != pid
        assert call("mcp_demo__counter")["for_llm"] == "1"  # a new server process


@pytest.fixture
def retrying_cluster(live, settings):  # type: ignore[no-untyped-def]
    """A django-q2 cluster of its own that may reach the test MCP servers (127.0.0.2) and retries a
    failed discovery after 1 s; the session's cluster is stopped first, so this one takes the jobs."""
    from django.db import connection

    from tests.mcp.live_servers import ALLOW_NETS
    from tests.processes import LiveProcesses

    settings.TOOLGATE_SSRF_ALLOW_NETS = ALLOW_NETS
    live.stop_qcluster()
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={"TOOLGATE_SSRF_ALLOW_NETS": ALLOW_NETS, "TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS": "1"},
        label="mcp-retry-",
    )
    processes.qcluster()
    try:
        yield processes
    finally:
        processes.stop_all()


def test_a_server_down_at_registration_gets_its_tools_once_it_is_up(tenant_a, retrying_cluster):
    from tests.mcp.live_servers import free_port, http_server, url

    port = free_port()
    system = Actor.system(tenant_a)
    server = services.server_create(
        actor=system, name="late", transport="streamable-http", url=url("streamable-http", port)
    )
    rows = MCPServer.objects.for_tenant(tenant_a)
    wait_for(
        lambda: rows.get(pk=server.pk).discovery_failures >= 1,
        "the worker's discovery fails and a retry is scheduled",
    )
    failed = rows.get(pk=server.pk)
    assert failed.status == "error"
    assert failed.discovery_retry_at is not None
    with http_server("streamable-http", port):
        # django-q2's scheduler looks for due schedules every 30 s
        wait_for(
            lambda: (
                MCPServerTool.objects.for_tenant(tenant_a).filter(server=server).count() == len(DEMO_TOOLS)
            ),
            "a retry discovers the tools without anyone's action",
            timeout=120,
        )
        wait_for(lambda: rows.get(pk=server.pk).status == "connected", "the status is recorded")
    found = rows.get(pk=server.pk)
    assert (found.discovery_failures, found.discovery_retry_at) == (0, None)
