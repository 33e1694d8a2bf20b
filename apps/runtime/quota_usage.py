"""What a tenant uses of each quota now (``show_quota``, ``GET /api/v1/tenant/quota``, the dashboard),
and the workspace-bytes check of the tools that write files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache

from apps.mcp_grants.models import MCPServer
from apps.memory.models import MemoryChunk
from apps.runs.models import ACTIVE, Run
from apps.runtime.quota_limits import WINDOW_SECONDS
from apps.runtime.ratelimit import window_count
from apps.tenants import quotas
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_root

# The tools that add files to a workspace: refused while the tenant is over its workspace_bytes quota.
WORKSPACE_WRITERS = frozenset(
    {"write_file", "edit", "exec", "credentialed_exec", "create_image", "create_audio", "create_video", "tts"}
)


@dataclass(frozen=True)
class Usage:
    name: str
    limit: int
    default: int
    overridden: bool
    used: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "default_limit": self.default,
            "overridden": self.overridden,
            "used": self.used,
            "description": quotas.DESCRIPTIONS[self.name],
        }


def workspace_bytes(tenant: Tenant, *, fresh: bool = False) -> int:
    """Bytes on disk in the tenant's workspace tree (symlinks not followed), kept for a few seconds."""
    key = f"quota-workspace-bytes:{tenant.pk}:"
    if not fresh:
        cached = cache.get(key)
        if isinstance(cached, int):
            return cached
    total = 0
    root = workspace_root() / "tenants" / str(tenant.pk)
    for directory, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            try:
                total += (Path(directory) / name).lstat().st_size
            except OSError:
                continue  # removed meanwhile
    # Walking a big tree costs: its size is kept (shared by every process) TOOLGATE_WORKSPACE_MEASURE_SECONDS.
    cache.set(key, total, settings.TOOLGATE_WORKSPACE_MEASURE_SECONDS)
    return total


def used(tenant: Tenant, name: str) -> int:
    if name in quotas.RATES:
        return window_count(key=f"{tenant.pk}:quota:{name}", window=WINDOW_SECONDS)
    if name == "concurrent_runs":
        return Run.objects.for_tenant(tenant).filter(status__in=ACTIVE).count()
    if name == "agents":
        return Agent.objects.for_tenant(tenant).count()
    if name == "mcp_servers":
        return MCPServer.objects.for_tenant(tenant).count()
    if name == "memory_chunks":
        return MemoryChunk.objects.for_tenant(tenant).count()
    if name == "workspace_bytes":
        return workspace_bytes(tenant)
    raise KeyError(name)


def usage(tenant: Tenant) -> list[Usage]:
    """Every quota of ``tenant``: its limit (0: none), where the limit comes from, and what is used."""
    rows = []
    for name in quotas.NAMES:
        current = quotas.limit(tenant, name)
        rows.append(Usage(name, current.value, current.default, current.overridden, used(tenant, name)))
    return rows


def workspace_refusal(tenant: Tenant, tool: str) -> str | None:
    """The error a file-writing tool gets while the tenant's workspaces hold its quota or more."""
    if tool not in WORKSPACE_WRITERS:
        return None
    current = quotas.limit(tenant, "workspace_bytes")
    if current.unlimited:
        return None
    size = workspace_bytes(tenant)
    if size < current.value:
        return None
    return (
        f"Tool call refused: the tenant's workspaces hold {size} bytes, its quota workspace_bytes is "
        f"{current.value}. Delete files you no longer need (or ask an operator to raise the quota), then "
        "try again."
    )
