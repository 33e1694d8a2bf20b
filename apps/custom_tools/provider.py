"""Custom tools as tools of the runtime: the names the policy engine knows (a universe source with the
group ``custom``), their definitions for listings and the call-time lookup for the pipeline (a provider,
``apps.toolkit.providers``).

What an agent has is read once per process for each configuration version of its tenant: every change
to a custom tool raises the tenant's ``config_version`` in its transaction, and each request reads the
version with its tenant, so the next call in any process sees the change (no restart, nothing to
invalidate by hand).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from apps.custom_tools import selectors
from apps.custom_tools.execution import ToolSpec, execute
from apps.custom_tools.models import NAME_RE
from apps.custom_tools.validation import reserved_name
from apps.toolkit.providers import ExternalTool, ToolRefused

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.context import CallContext
    from apps.toolkit.results import ToolResult

GROUP = "custom"
_NAME = re.compile(NAME_RE)

_CACHE: OrderedDict[tuple[Any, ...], Mapping[str, ToolSpec]] = OrderedDict()
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


def tools_for(tenant: Tenant, agent: Agent | None) -> Mapping[str, ToolSpec]:
    """The enabled custom tools of ``agent`` (its own over the global ones), or the global ones with
    ``agent`` None; kept per process for the tenant's ``config_version``."""
    key = (tenant.pk, tenant.config_version, agent.pk if agent is not None else None)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    found = {
        name: ToolSpec.of(tool)
        for name, tool in selectors.effective_tools(tenant=tenant, agent=agent).items()
        if reserved_name(name) is None  # a name that became a built-in's stays the built-in's
    }
    with _CACHE_LOCK:
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found


def custom_source(
    tenant: Tenant, agent: Agent | None, user_id: str
) -> tuple[Iterable[str], Mapping[str, Iterable[str]]]:
    """Universe source: with an agent, the custom tools it has; without, every custom tool name of the
    tenant (enabled or not, any scope), so that a saved policy may name any of them."""
    if agent is None:
        names = [name for name in selectors.all_names(tenant=tenant) if reserved_name(name) is None]
    else:
        names = sorted(tools_for(tenant, agent))
    return names, {GROUP: names}


def _run(spec: ToolSpec) -> Callable[[CallContext, dict[str, Any]], ToolResult]:
    def run(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return execute(ctx, spec, args, check_schema=False).result

    return run


class CustomToolProvider:
    """Custom tools for the pipeline and the listings. Never claims a catalog, alias, domain or MCP
    name (those are refused as custom tool names, and their owners are asked first anyway)."""

    def owns(self, name: str, tenant: Tenant | None = None) -> bool:
        return bool(_NAME.match(name)) and reserved_name(name) is None

    def definitions(
        self, tenant: Tenant, names: Iterable[str], agent: Agent | None = None
    ) -> list[dict[str, Any]]:
        tools = tools_for(tenant, agent)
        return [tools[name].definition() for name in names if name in tools]

    def resolve(self, tenant: Tenant, agent: Agent, user_id: str, name: str) -> ExternalTool:
        spec = tools_for(tenant, agent).get(name)
        if spec is None:
            raise ToolRefused(
                "custom_tool_unavailable", f"{name}: no enabled custom tool of this name for this agent."
            )
        return ExternalTool(name, spec.definition()["parameters"], _run(spec))
