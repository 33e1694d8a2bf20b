"""The tool definitions an agent may use for one call: what ``GET /api/v1/agents/<key>/tools`` returns
and what Toolgate's own MCP endpoint lists (one function, so the two never disagree).

Built-in tools come from the catalog (those implemented in this deployment, unless asked for all);
the others from their providers (``apps.toolkit.providers``: MCP tools from the tools discovered on
their servers, ``mcp_<server>__<tool>``), always flat whatever the style. Sorted by name, stable for
prompt caching.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.policy import engine
from apps.policy.engine import CallScope
from apps.tenants.models import Agent, Tenant
from apps.toolkit import presentation, providers
from apps.tools.catalog import CATALOG


def definitions(
    *,
    tenant: Tenant,
    agent: Agent,
    scope: CallScope,
    tool_allow: Sequence[str] | None = None,
    style: presentation.Style = "flat",
    include_unavailable: bool = False,
    session_key: str = "",
) -> list[dict[str, Any]]:
    """``{"name", "description", "parameters"}`` per tool ``agent`` may use in ``scope`` (and
    ``session_key``, whose MCP search may have activated deferred tools)."""
    allowed = engine.resolve(tenant, agent, scope).allowed(tool_allow)
    builtin = [name for name in allowed if name in CATALOG]
    names = builtin if include_unavailable else presentation.runnable(builtin)
    result = presentation.plain_definitions(names, style)
    external = [name for name in allowed if name not in CATALOG]
    if external:
        external = providers.listed(
            external, tenant=tenant, agent=agent, user_id=scope.user_id, session_key=session_key
        )
    if external:
        result.extend(providers.definitions(tenant, external, agent))
        result.sort(key=lambda d: str(d["name"]))
    return result
