"""MCP test data built through the services, with discovered tools written as the client manager
writes them."""

from __future__ import annotations

from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant


def make_server(tenant: Tenant, name: str, tools: list[str], **fields) -> MCPServer:  # type: ignore[no-untyped-def]
    fields.setdefault("transport", "stdio")
    fields.setdefault("command", "npx")
    server = services.server_create(actor=Actor.system(tenant), name=name, **fields)
    for tool in tools:
        MCPServerTool.objects.create(tenant=tenant, server=server, name=tool)
    return server
