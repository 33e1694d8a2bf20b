"""MCP tools as tools of the runtime pipeline: their definitions for listings."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apps.mcp_grants import naming
from apps.mcp_grants.models import MCPServerTool
from apps.tenants.models import Tenant

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def definitions(tenant: Tenant, names: Iterable[str]) -> list[dict[str, Any]]:
    """The definitions of the registered MCP tool ``names`` (one query); unknown names are left out."""
    wanted = set(names)
    tools = {split[1] for split in map(naming.split, wanted) if split is not None}
    if not tools:
        return []
    result = []
    for row in MCPServerTool.objects.for_tenant(tenant).filter(name__in=tools).select_related("server"):
        registered = naming.registered_name(row.server, row.name)
        if registered in wanted:
            wanted.discard(registered)
            result.append(
                {
                    "name": registered,
                    "description": row.description or f"{row.name} (MCP server {row.server.name})",
                    "parameters": row.input_schema or EMPTY_SCHEMA,
                }
            )
    return sorted(result, key=lambda d: str(d["name"]))
