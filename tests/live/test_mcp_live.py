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
from tests.mcp.live_servers import kill_stdio_servers, stdio_fields

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
    wait_for(lambda: tools.count() == 13, "the worker discovers the tools of a new server")
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
