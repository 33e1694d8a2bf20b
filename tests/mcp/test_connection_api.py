"""``POST /api/v1/mcp/servers/<name>/test`` and ``.../refresh``: one fresh session to a real MCP server
(the SDK demo over stdio), its tools reported, or stored as the server's discovered tools."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from tests.api.personas import check_personas
from tests.mcp.live_servers import stdio_fields

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("mcp_connections")]

URL = "/api/v1/mcp/servers/{name}/{action}"


def server(tenant, name="demo", **fields):
    return services.server_create(actor=Actor.system(tenant), name=name, **{**stdio_fields(), **fields})


@pytest.mark.parametrize("action", ["test", "refresh"])
def test_personas(action, request, tenant_a):
    server(tenant_a)
    check_personas(
        request,
        tenant_a,
        method="post",
        url=URL.format(name="demo", action=action),
        body=None,
        least="admin",
        success=200,
        outsider_status=404,
        never_shown_to_outsider=("demo",),
    )


def test_test_reports_without_storing(tenant_a, admin_a):
    made = server(tenant_a)
    body = admin_a.post(URL.format(name="demo", action="test")).json()
    assert body["ok"] is True
    assert body["error"] == ""
    assert body["duration_ms"] > 0
    names = {t["name"]: t for t in body["tools"]}
    assert names["echo"] == {
        "name": "echo",
        "registered_name": "mcp_demo__echo",
        "description": "Echo the text back.",
    }
    assert not MCPServerTool.objects.for_tenant(tenant_a).filter(server=made).exists()
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.server.tested")
    assert event.data["ok"] is True
    assert "echo" in event.data["tools"]


def test_refresh_stores_the_tools_and_the_status(tenant_a, admin_a):
    made = server(tenant_a)
    body = admin_a.post(URL.format(name="demo", action="refresh")).json()
    assert body["ok"] is True
    stored = set(
        MCPServerTool.objects.for_tenant(tenant_a).filter(server=made).values_list("name", flat=True)
    )
    assert stored == {t["name"] for t in body["tools"]}
    assert "pid" in stored
    listed = admin_a.get("/api/v1/mcp/servers/demo/tools/").json()
    assert "mcp_demo__pid" in {t["registered_name"] for t in listed["results"]}
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=made.pk).status == "connected"
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="mcp.server.refreshed").count() == 1


def test_an_unreachable_server_is_reported_with_its_reason_and_no_secret(tenant_a, admin_a):
    made = server(
        tenant_a, args=[stdio_fields()["args"][0], "nowhere"], env={"TOKEN": "a-secret-token-value"}
    )
    body = admin_a.post(URL.format(name="demo", action="refresh")).json()
    assert body["ok"] is False
    assert body["error"]
    assert body["tools"] == []
    assert "a-secret-token-value" not in str(body)
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=made.pk).status == "error"
    assert not MCPServerTool.objects.for_tenant(tenant_a).filter(server=made).exists()
