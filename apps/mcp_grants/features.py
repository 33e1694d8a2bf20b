"""Resources, prompts and completion of MCP servers through the bridge (README "Resources and prompts").

Which servers offer their resources (or prompts) to an agent (acting for a user): the servers it can
reach, by the same grants as their tools (:func:`apps.mcp_grants.reachability.accessible`), whose grants
leave the ``resources`` (or ``prompts``) switch on: the agent's grant, and the user's when there is one.
What the policy adds on top is decided by the runtime (``apps.runtime.mcp_features``).

The requests run on the process's reused connection to each server (the user's own, when they have
credentials), within the server's timeout, like a tool call. Every failure is a :class:`FeatureError`
whose message names the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from apps.mcp_grants import client, naming
from apps.mcp_grants.models import MCPServer
from apps.mcp_grants.reachability import accessible
from apps.tenants.models import Agent, Tenant

T = TypeVar("T")
Feature = Literal["resources", "prompts"]
MAX_LISTED = 1000  # items of one list per server (the rest are left out, and the listing says so)
MAX_PAGES = 50


class FeatureError(Exception):
    """A server could not answer; the message says which server and why."""


def servers_offering(tenant: Tenant, agent: Agent, user_id: str, feature: Feature) -> list[MCPServer]:
    """The servers whose ``feature`` the agent's grant (and the user's, when there is one) allows, by
    name."""
    return [
        entry.server
        for entry in accessible(tenant, agent, user_id)
        if getattr(entry.agent_grant, feature)
        and (entry.user_grant is None or getattr(entry.user_grant, feature))
    ]


def policy_name(server: MCPServer, feature: Feature) -> str:
    """The name the policy decides a server's ``feature`` by: in the server's tool namespace (so that
    ``group:mcp``, ``group:mcp:<server>`` and patterns such as ``mcp_*`` or ``mcp_<prefix>__*`` select
    it as they select its tools), with braces that no tool name can hold."""
    return f"{naming.server_prefix(server)}{naming.SEPARATOR}{{{feature}}}"


def _request(
    server: MCPServer,
    user_id: str,
    send: Callable[[ClientSession, float], Awaitable[T]],
    what: str,
    within: float | None = None,
) -> T:
    """``send`` on the server's session, within its timeout, or within ``within`` seconds when that is
    shorter (connecting included: a page that lists several servers gives each a short budget)."""
    endpoint = client.endpoint_for(server, client.credential_for(server, user_id))
    if within is not None and within < endpoint.timeout:
        endpoint = dataclasses.replace(endpoint, timeout=within)  # the same connection: not in its key
    mgr = client.manager()
    try:
        return mgr.run(mgr.request(endpoint, send, what), endpoint.timeout + client.CONNECT_TIMEOUT + 5)
    except client.MCPTimeout as exc:
        raise FeatureError(f"MCP server {server.name!r}: {what} {exc}.") from None
    except client.MCPUnavailable as exc:
        raise FeatureError(str(exc)) from None
    except MCPError as exc:
        raise FeatureError(f"MCP server {server.name!r} refused the {what}: {client.describe(exc)}") from None
    except RuntimeError as exc:  # an answer the SDK does not accept here (an input request, say)
        raise FeatureError(f"MCP server {server.name!r} answered the {what} unexpectedly: {exc}") from None


def secrets(server: MCPServer, user_id: str) -> list[str]:
    """The connection's own secrets (API key, header and environment values), for the scrubber."""
    return client.endpoint_for(server, client.credential_for(server, user_id)).secrets


def _all_pages(
    server: MCPServer,
    user_id: str,
    what: str,
    page: Callable[[ClientSession, str | None], Awaitable[Any]],
    items: Callable[[Any], list[T]],
    within: float | None = None,
) -> tuple[list[T], bool]:
    async def send(session: ClientSession, remaining: float) -> tuple[list[T], bool]:
        found: list[T] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = await page(session, cursor)
            found.extend(items(result))
            cursor = getattr(result, "next_cursor", None)
            if not cursor or len(found) >= MAX_LISTED:
                break
        return found[:MAX_LISTED], bool(cursor) or len(found) > MAX_LISTED

    return _request(server, user_id, send, what, within)


def _page(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor else None


def list_resources(
    server: MCPServer, user_id: str, within: float | None = None
) -> tuple[list[types.Resource], bool]:
    """The server's resources (every page, up to :data:`MAX_LISTED`), and whether some were left out."""
    return _all_pages(
        server,
        user_id,
        "resources/list",
        lambda session, cursor: session.list_resources(params=_page(cursor)),
        lambda result: list(result.resources),
        within,
    )


def list_resource_templates(
    server: MCPServer, user_id: str, within: float | None = None
) -> tuple[list[types.ResourceTemplate], bool]:
    """The server's resource templates (every page, up to :data:`MAX_LISTED`)."""
    return _all_pages(
        server,
        user_id,
        "resources/templates/list",
        lambda session, cursor: session.list_resource_templates(params=_page(cursor)),
        lambda result: list(result.resource_templates),
        within,
    )


def read_resource(server: MCPServer, user_id: str, uri: str) -> types.ReadResourceResult:
    """``resources/read`` of ``uri`` on the server (a 2026-07-28 server's request for input answered as
    with no client: :func:`apps.mcp_grants.client.answered`)."""

    async def send(session: ClientSession, remaining: float) -> types.ReadResourceResult:
        if not client.is_modern(session):
            return await session.read_resource(uri)
        answer: types.ReadResourceResult = await client.answered(
            lambda responses, state: session.read_resource(
                uri, input_responses=responses, request_state=state, allow_input_required=True
            ),
            None,
        )
        return answer

    return _request(server, user_id, send, "resources/read")


def list_prompts(
    server: MCPServer, user_id: str, within: float | None = None
) -> tuple[list[types.Prompt], bool]:
    """The server's prompts (every page, up to :data:`MAX_LISTED`), under their own names."""
    return _all_pages(
        server,
        user_id,
        "prompts/list",
        lambda session, cursor: session.list_prompts(params=_page(cursor)),
        lambda result: list(result.prompts),
        within,
    )


def get_prompt(
    server: MCPServer, user_id: str, name: str, arguments: dict[str, str]
) -> types.GetPromptResult:
    """``prompts/get`` of the server's prompt ``name`` (its own name; a 2026-07-28 server's request for
    input answered as with no client: :func:`apps.mcp_grants.client.answered`)."""

    async def send(session: ClientSession, remaining: float) -> types.GetPromptResult:
        if not client.is_modern(session):
            return await session.get_prompt(name, arguments)
        answer: types.GetPromptResult = await client.answered(
            lambda responses, state: session.get_prompt(
                name, arguments, input_responses=responses, request_state=state, allow_input_required=True
            ),
            None,
        )
        return answer

    return _request(server, user_id, send, "prompts/get")


def complete(
    server: MCPServer,
    user_id: str,
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: dict[str, str] | None,
) -> types.CompleteResult:
    """``completion/complete`` on the server, ``ref`` naming its own prompt or template."""
    return _request(
        server,
        user_id,
        lambda session, remaining: session.complete(
            ref, {"name": argument.name, "value": argument.value}, context
        ),
        "completion/complete",
    )


def subscribe(server: MCPServer, user_id: str, uri: str) -> None:
    """``resources/subscribe`` of ``uri`` on the server's connection."""
    _request(
        server, user_id, lambda session, remaining: session.subscribe_resource(uri), "resources/subscribe"
    )


def unsubscribe(server: MCPServer, user_id: str, uri: str) -> None:
    _request(
        server, user_id, lambda session, remaining: session.unsubscribe_resource(uri), "resources/unsubscribe"
    )


def credential_user(server: MCPServer, user_id: str) -> str:
    """The user whose own credentials the server's connection for ``user_id`` uses ("" for none)."""
    return client.endpoint_for(server, client.credential_for(server, user_id)).user_id
