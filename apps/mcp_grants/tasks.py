"""django-q2 jobs of MCP servers. Jobs take ids, re-read through the tenant, and are idempotent."""

from __future__ import annotations

import logging

from django.db import transaction

from apps.mcp_grants import client
from apps.mcp_grants.models import MCPServer
from apps.tenants.models import Tenant

logger = logging.getLogger(__name__)


def discover(tenant_id: str, server_id: str) -> bool:
    """Connect to the server once (a fresh session, closed again: a worker keeps no connections), store
    its tools and record its status. False when the server is gone, disabled or unreachable."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return False
    server = MCPServer.objects.for_tenant(tenant).filter(pk=server_id, enabled=True).first()
    if server is None:
        return False
    return client.probe(server, store=True).ok


def schedule_discovery(server: MCPServer) -> None:
    """Discover ``server``'s tools in the background once the current transaction commits."""
    from django_q.tasks import async_task

    tenant_id, server_id = str(server.tenant_id), str(server.pk)
    transaction.on_commit(
        lambda: async_task("apps.mcp_grants.tasks.discover", tenant_id, server_id, group="mcp")
    )
