"""Registered names that would collide (one name, two tools), refused when a server is registered or
changed and again when its tools are discovered: a tool of an unprefixed server (``naming``) keeps its
own name, which may already be a built-in tool's (or an alias's, a domain tool's, the MCP search
tool's), one of the tenant's custom tools' or another of the tenant's servers' tool's.

Only the tenant's own servers and custom tools count. Other apps that give tools names of their own
register them from their ``ready()`` (:func:`register_names`): this app cannot import them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from apps.mcp_grants import naming, search_mode, selectors
from apps.toolkit.strap import DOMAINS
from apps.tools.catalog import ALIASES, CATALOG

if TYPE_CHECKING:
    from apps.mcp_grants.models import MCPServer
    from apps.tenants.models import Tenant

NameSource = Callable[["Tenant"], Iterable[str]]
_SOURCES: list[tuple[str, NameSource]] = []


def register_names(kind: str, source: NameSource) -> None:
    """Names of ``kind`` (``"custom tool"``) a tenant's MCP tools may not take (idempotent)."""
    if (kind, source) not in _SOURCES:
        _SOURCES.append((kind, source))


def builtin_reason(name: str) -> str | None:
    if name in CATALOG:
        return "the built-in tool of that name"
    if name in ALIASES:
        return f"the alias of the built-in tool {ALIASES[name]!r}"
    if name in DOMAINS:
        return "the domain tool of that name (the grouped form of the built-in tools)"
    if name == search_mode.TOOL_NAME:
        return "the built-in MCP search tool"
    return None


def conflicts(tenant: Tenant, server: MCPServer, tools: Iterable[str]) -> dict[str, str]:
    """The original names among ``tools`` of ``server`` whose registered name is taken, each with a
    message naming both sides; the others are free."""
    names = {naming.registered_name(server, tool): tool for tool in tools}
    if not names:
        return {}
    found: dict[str, str] = {}
    taken = selectors.registered_tool_names(tenant=tenant, exclude_server=server)
    others: dict[str, str] = {}
    for kind, source in _SOURCES:
        for other in source(tenant):
            others.setdefault(other, kind)
    for registered, tool in sorted(names.items()):
        reason = builtin_reason(registered)
        if reason is None and registered in others:
            reason = f"the {others[registered]} {registered!r}"
        if reason is None and registered in taken:
            reason = f"a tool of the MCP server {taken[registered]!r}"
        if reason is not None:
            found[tool] = (
                f"the tool {tool!r} of the MCP server {server.name!r} would be registered as "
                f"{registered!r}, the name of {reason}."
            )
    return found


def summary(found: dict[str, str], limit: int = 5) -> str:
    """One message for ``found`` (of :func:`conflicts`), naming the first few."""
    shown = [found[tool] for tool in sorted(found)[:limit]]
    more = len(found) - len(shown)
    return " ".join(shown) + (f" ({more} more.)" if more > 0 else "")
