"""The MCP tools the policy engine knows: registered names and the groups ``mcp`` and ``mcp:<server>``,
and ``mcp_tool_search`` in ``mcp`` for agents in search mode (:mod:`apps.mcp_grants.search_mode`).

A registered name is ``mcp_<prefix>__<tool>``, or the tool's own name for a server registered without a
prefix (``naming``): a pattern such as ``mcp_<server>__*`` selects a prefixed server's tools only; the
group ``mcp:<server>`` (and ``mcp``) holds every server's, prefixed or not, and an unprefixed server's
tool is named by its own name. Either way an agent reaches a server's tools only through its grant.

With an agent: what that agent (and user) can reach (:func:`apps.mcp_grants.reachability.accessible`); with
``agent=None``: every discovered tool of the tenant, so that a saved policy may name any of them (and
every server's group, tools or not). A name
that collides with a built-in tool is left out (B §3.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from apps.mcp_grants import naming, search_mode
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.mcp_grants.reachability import accessible
from apps.tools.catalog import CATALOG

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

GROUP = "mcp"


def mcp_source(
    tenant: Tenant, agent: Agent | None, user_id: str
) -> tuple[Iterable[str], Mapping[str, Iterable[str]]]:
    per_server: dict[str, list[str]] = {}
    if agent is None:
        servers = {s.pk: s for s in MCPServer.objects.for_tenant(tenant)}
        for server in servers.values():
            per_server[server.name] = []
        for server_id, tool in (
            MCPServerTool.objects.for_tenant(tenant).order_by("name").values_list("server_id", "name")
        ):
            server = servers[server_id]
            per_server.setdefault(server.name, []).append(naming.registered_name(server, tool))
    else:
        for entry in accessible(tenant, agent, user_id):
            per_server[entry.server.name] = list(entry.registered)
    groups: dict[str, list[str]] = {}
    names: list[str] = []
    for server_name, registered in per_server.items():
        kept = [n for n in registered if n not in CATALOG]
        groups[f"{GROUP}:{server_name}"] = kept
        names.extend(kept)
    # Search mode: the search tool joins the MCP tools when an agent has very many (with agent=None,
    # always, so that a saved policy may name it).
    if agent is None or search_mode.active(names, unprefixed=set(names)):
        names.append(search_mode.TOOL_NAME)
    groups[GROUP] = names  # always defined, so that a policy may name it before any server exists
    return names, groups
