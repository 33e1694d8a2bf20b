"""MCP tools as tools of the runtime pipeline: their definitions for listings, the call-time access
check, argument handling, the call over the process's reused connection, and the faithful mapping of
MCP results (text, images, audio, resources, structured content, errors) to a tool result.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError

from apps.mcp_grants import client, naming, notices, reachability, search_mode, selectors
from apps.mcp_grants.models import AgentGrant, MCPServer, MCPServerTool
from apps.tenants.models import Agent, Tenant
from apps.toolkit.providers import ExternalTool, ToolRefused
from apps.toolkit.results import ToolResult

if TYPE_CHECKING:
    from apps.toolkit.context import CallContext

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
MAX_RESULT_CHARS = 1024 * 1024
MAX_BINARY_BYTES = 8 * 1024 * 1024  # images, audio and binary resources of one result, decoded


def definitions(tenant: Tenant, names: Iterable[str]) -> list[dict[str, Any]]:
    """The definitions of the registered MCP tool ``names`` (one query); unknown names are left out."""
    wanted = set(names)
    unprefixed = selectors.unprefixed_tools(tenant)
    tools = {split[1] for split in map(naming.split, wanted) if split is not None}
    tools |= {name for name in wanted if name in unprefixed}
    if not tools:
        return []
    result = []
    for row in MCPServerTool.objects.for_tenant(tenant).filter(name__in=tools).select_related("server"):
        registered = naming.registered_name(row.server, row.name)
        if registered in wanted:
            wanted.discard(registered)
            definition: dict[str, Any] = {
                "name": registered,
                "description": row.description or f"{row.name} (MCP server {row.server.name})",
                "parameters": row.input_schema or EMPTY_SCHEMA,
            }
            if row.title:
                definition["title"] = row.title
            if row.output_schema is not None:
                definition["output_schema"] = row.output_schema
            if row.annotations:
                definition["annotations"] = row.annotations
            result.append(definition)
    return sorted(result, key=lambda d: str(d["name"]))


# --- what an agent (for a user) can call ----------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    server: MCPServer
    tool: str  # the original name on the server
    schema: dict[str, Any]


@dataclass(frozen=True)
class _Reachable:
    targets: dict[str, Target]
    refused: dict[str, str]  # registered name of a discovered tool -> why it may not be called


_CACHE: OrderedDict[tuple[Any, ...], _Reachable] = OrderedDict()
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


def _reachable(tenant: Tenant, agent: Agent, user_id: str) -> _Reachable:
    """The MCP tools ``agent`` may call for ``user_id`` (:func:`reachability.accessible`, deny lists of both
    grants included), kept per process for the tenant's ``config_version``: every change of a server,
    grant or discovered tool raises it, so a revoked grant is never served from here."""
    key = (tenant.pk, tenant.config_version, agent.pk, user_id)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    entries = reachability.accessible(tenant, agent, user_id)
    schemas = {
        (row[0], row[1]): row[2]
        for row in MCPServerTool.objects.for_tenant(tenant)
        .filter(server_id__in=[e.server.pk for e in entries])
        .values_list("server_id", "name", "input_schema")
    }
    targets: dict[str, Target] = {}
    refused: dict[str, str] = {}
    for entry in entries:
        for (server_id, tool), schema in schemas.items():
            if server_id != entry.server.pk:
                continue
            name = naming.registered_name(entry.server, tool)
            if tool in entry.tools:
                targets[name] = Target(entry.server, tool, schema or EMPTY_SCHEMA)
            else:
                refused[name] = "tool_not_in_allow_list"
    reachable = _Reachable(targets, refused)
    with _CACHE_LOCK:
        _CACHE[key] = reachable
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return reachable


def target(tenant: Tenant, agent: Agent, user_id: str, name: str) -> Target:
    """The server and tool behind ``name`` if ``agent`` may call it for ``user_id`` now, else
    :class:`ToolRefused` (``server_not_accessible`` or ``tool_not_in_allow_list``)."""
    reachable = _reachable(tenant, agent, user_id)
    found = reachable.targets.get(name)
    if found is not None:
        return found
    if name in reachable.refused:
        raise ToolRefused("tool_not_in_allow_list", f"{name}: the tool is not allowed for this agent.")
    raise ToolRefused("server_not_accessible", f"{name}: no accessible MCP server provides this tool.")


def not_granted(tenant: Tenant, agent: Agent, user_id: str, name: str) -> str | None:
    """Why ``name``, a tool discovered on one of the tenant's enabled MCP servers, is not this agent's
    (for ``user_id``), and how to ask for it; None when ``name`` is no such tool or the agent has it."""
    unprefixed = selectors.unprefixed_tools(tenant)
    if (naming.split(name) is None and name not in unprefixed) or name in _reachable(
        tenant, agent, user_id
    ).targets:
        return None
    servers = list(MCPServer.objects.for_tenant(tenant).filter(enabled=True))
    found = naming.parse(name, servers, {n: s for n, s in unprefixed.items() if s.enabled})
    if found is None:
        return None
    server, tool = found
    if not MCPServerTool.objects.for_tenant(tenant).filter(server=server, name=tool).exists():
        return None
    agent_grant = (
        AgentGrant.objects.for_tenant(tenant).filter(server=server, agent_id=agent.pk, enabled=True).first()
    )
    ask = f'with POST /api/v1/mcp/requests/ {{"server": "{server.name}", '
    if agent_grant is None:
        return (
            f"agent {agent.key!r} has no grant for MCP server {server.name!r}. A member can request access "
            f'{ask}"scope": "agent", "agent": "{agent.key}", "tool_allow": ["{tool}"], "reason": "..."}}'
        )
    if not reachability.is_tool_allowed(tool, *agent_grant.filters()):
        return f"the grant for MCP server {server.name!r} leaves out the tool {tool!r}"
    return (
        f"the grant of user {user_id!r} for MCP server {server.name!r} does not include the tool {tool!r}. "
        f'A member can request access {ask}"scope": "user", "user_id": "{user_id}", '
        f'"tool_allow": ["{tool}"], "reason": "..."}}'
    )


def reachable_names(tenant: Tenant, agent: Agent, user_id: str) -> list[str]:
    """The registered names of every MCP tool ``agent`` may call for ``user_id`` now."""
    return sorted(_reachable(tenant, agent, user_id).targets)


class MCPProvider:
    """MCP tools for the pipeline and the listings (``apps.toolkit.providers``), and the search tool of
    search mode (:mod:`apps.mcp_grants.search_mode`)."""

    def owns(self, name: str, tenant: Tenant | None = None) -> bool:
        """A prefixed name (``mcp_<server>__<tool>``), the search tool, or, with ``tenant``, the own
        name of a tool of one of its unprefixed servers."""
        if name == search_mode.TOOL_NAME or naming.split(name) is not None:
            return True
        return tenant is not None and name in selectors.unprefixed_tools(tenant)

    def listed(
        self, names: list[str], *, tenant: Tenant, agent: Agent, user_id: str, session_key: str
    ) -> list[str]:
        return search_mode.listed(names, tenant=tenant, agent=agent, user_id=user_id, session_key=session_key)

    def definitions(
        self, tenant: Tenant, names: Iterable[str], agent: Agent | None = None
    ) -> list[dict[str, Any]]:
        names = list(names)
        found = definitions(tenant, [n for n in names if n != search_mode.TOOL_NAME])
        if search_mode.TOOL_NAME in names:
            found = sorted([*found, search_mode.DEFINITION], key=lambda d: str(d["name"]))
        return found

    def not_granted(self, tenant: Tenant, agent: Agent, user_id: str, name: str) -> str | None:
        return not_granted(tenant, agent, user_id, name)

    def resolve(self, tenant: Tenant, agent: Agent, user_id: str, name: str) -> ExternalTool:
        if name == search_mode.TOOL_NAME:
            return ExternalTool(name, search_mode.DEFINITION["parameters"], search_mode.run)
        found = target(tenant, agent, user_id, name)
        return ExternalTool(name, found.schema, lambda ctx, args: run(ctx, name, found, args))


# --- the call -----------------------------------------------------------------------------------------


def run(ctx: CallContext, name: str, found: Target, args: dict[str, Any]) -> ToolResult:
    """Call ``found`` on this process's connection to its server (the user's own, when they have
    credentials), within the server's timeout; every failure is an error result naming the server."""
    server = found.server
    endpoint = client.endpoint_for(server, client.credential_for(server, ctx.user_id))
    for secret in endpoint.secrets:
        ctx.scrubber.register(secret)
    listener = notices.prepared(notices.current(), ctx.scrubber.scrub)
    mgr = client.manager()
    try:
        result = mgr.run(
            mgr.call(endpoint, found.tool, args, listener), endpoint.timeout + client.CONNECT_TIMEOUT + 5
        )
    except client.MCPTimeout as exc:
        return ToolResult.error(
            f"MCP tool {name} {exc} (server {server.name!r}); the server may be busy or hung. Try again "
            "later or with a smaller request.",
            server=server.name,
        )
    except client.MCPUnavailable as exc:
        return ToolResult.error(f"{exc}", server=server.name)
    except MCPError as exc:
        reason = client.describe(exc)
        return ToolResult.error(
            f"MCP server {server.name!r} refused the call of {found.tool}: {reason}", server=server.name
        )
    return to_result(result, server=server.name)


def to_result(result: Any, *, server: str = "") -> ToolResult:
    """An MCP ``CallToolResult`` as a tool result: text blocks joined for the model; every block kept,
    in order, in ``data["content"]``: text, images and audio (base64, with their MIME types, named in
    the text), embedded resources (their text inlined for the model; binary ones named) and resource
    links; ``structuredContent`` in ``data["structured_content"]`` (and as JSON text when there is no
    text block); ``isError`` kept. Binary data beyond :data:`MAX_BINARY_BYTES` in all is left out, and
    the text says so."""
    texts: list[str] = []
    content: list[dict[str, Any]] = []
    binary = 0

    def fits(data: str) -> bool:
        nonlocal binary
        binary += len(data) * 3 // 4
        return binary <= MAX_BINARY_BYTES

    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
            content.append({"type": "text", "text": block.text})
        elif kind in {"image", "audio"}:
            size = len(block.data) * 3 // 4
            if not fits(block.data):
                texts.append(f"[{kind}: {block.mime_type}, about {size} bytes, left out: too large]")
                continue
            texts.append(f"[{kind}: {block.mime_type}, about {size} bytes]")
            content.append({"type": kind, "mime_type": block.mime_type, "data": block.data})
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            blob = getattr(resource, "blob", None)
            uri = str(getattr(resource, "uri", ""))
            mime_type = getattr(resource, "mime_type", None)
            item: dict[str, Any] = {"type": "resource", "uri": uri, "mime_type": mime_type}
            if text is not None:
                texts.append(text)
                item["text"] = text
            elif isinstance(blob, str) and fits(blob):
                texts.append(f"[resource {uri} ({mime_type or 'binary'})]")
                item["blob"] = blob
            else:
                texts.append(f"[resource {uri} ({mime_type or 'binary'}), left out: too large]")
                continue
            content.append(item)
        elif kind == "resource_link":
            texts.append(f"[resource link {block.uri}: {block.name}]")
            link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
            for field in ("description", "mime_type"):
                if getattr(block, field, None) is not None:
                    link[field] = getattr(block, field)
            content.append(link)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        texts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(texts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[output truncated at {MAX_RESULT_CHARS} characters]"
    data: dict[str, Any] = {}
    if any(c["type"] != "text" for c in content):
        data["content"] = content
    if structured is not None:
        data["structured_content"] = structured
    if server:
        data["server"] = server
    if getattr(result, "is_error", False):
        return ToolResult.error(text or "the MCP tool reported an error without a message", **data)
    return ToolResult.ok(text, **data)
