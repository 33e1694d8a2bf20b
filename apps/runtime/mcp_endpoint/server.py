"""The MCP server behind ``/mcp/<agent key>/``: one agent's tools, listed and called for one caller.

Who calls, for which agent and in which call scope is decided before the SDK sees the request
(``asgi``) and travels in the ASGI scope under :data:`CALLER_KEY`; the handlers read it from the
request the SDK hands them. Database work runs in the request's own worker thread
(``sync_to_async`` inside the request's ``ThreadSensitiveContext``), never on the event loop, and gives
its connection back as soon as it is done: a response that streams, or waits for an approval, holds
none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.cache import cache
from django.db import close_old_connections
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from apps.audit import context as request_context
from apps.mcp_grants import notices, subscriptions
from apps.policy.engine import CallScope
from apps.runtime import mcp_features, pipeline
from apps.runtime.approval_wait import finish_after_decision
from apps.runtime.selectors import agent_tool_definitions
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.toolkit import gateway, presentation

logger = logging.getLogger(__name__)

CALLER_KEY = "toolgate.mcp_caller"
# The origin of every call made over MCP: the key's own (``user`` unless an owner restricted the key), as
# for ``POST /api/v1/runtime/execute``, so an agent's tools and approvals are the same whichever way a
# client calls. None lets the pipeline derive it from the caller (``apps.runtime.caller``).
ORIGIN: str | None = None
MAX_TOOL_NAME_CHARS = 200  # as ``POST /api/v1/runtime/execute`` bounds ``tool``
META_PREFIX = "toolgate/"
# Binary content blocks of a result (MCP tools' images and audio) that reach the client as themselves.
MEDIA_TYPES = ("image", "audio")
MAX_RESULT_TEXT_CHARS = 1024 * 1024  # as ``for_llm`` is bounded (``apps.mcp_grants.bridge``)


@dataclass(frozen=True)
class Caller:
    """An authenticated MCP request: who, for which agent, in which call scope."""

    actor: Actor
    agent: Agent
    scope: CallScope
    session_key: str
    tool_allow: tuple[str, ...] | None
    style: presentation.Style
    request_id: str
    ip: str | None


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(CALLER_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # only reachable if the endpoint were mounted without its front
        raise MCPError(code=types.INTERNAL_ERROR, message="The request was not authenticated.")
    return caller


def _bind(caller: Caller) -> Any:
    return request_context.bind(
        request_context.RequestContext(
            request_id=caller.request_id, ip=caller.ip, tenant=caller.actor.tenant.slug
        )
    )


def _definitions(caller: Caller) -> list[dict[str, Any]]:
    token = _bind(caller)
    try:
        found = agent_tool_definitions(  # what the REST listing serves for the same scope
            actor=caller.actor,
            agent=caller.agent,
            scope=caller.scope,
            tool_allow=caller.tool_allow,
            style=caller.style,
            session_key=caller.session_key,
        )
        return presentation.render(found, "mcp")
    finally:
        request_context.reset(token)
        close_old_connections()


def _begin(
    caller: Caller, name: str, arguments: dict[str, Any], relay: _Relay | None = None
) -> gateway.CallOutcome | pipeline.PendingCall:
    token = _bind(caller)
    try:
        if relay is not None:  # the log levels are looked up only if a bridged tool runs
            version, meta = relay.ctx.protocol_version, relay.ctx.meta
            relay.listener.find_levels = lambda: log_levels(caller, version, meta)
        return pipeline.call(
            actor=caller.actor,
            request=gateway.CallRequest(
                agent=caller.agent,
                tool=name,
                args=arguments,
                session_key=caller.session_key,
                user_id=caller.scope.user_id,
                channel=caller.scope.channel,
                chat_id=caller.scope.chat_id,
                provider=caller.scope.provider,
                origin=ORIGIN,
                subagent_depth=caller.scope.subagent_depth,
                tool_allow=caller.tool_allow,
                style=caller.style,
            ),
            wait=True,
        )
    finally:
        request_context.reset(token)
        close_old_connections()


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """Exactly ``GET /api/v1/agents/<key>/tools?format=mcp`` for the same scope (viewers and up)."""
    rendered = await sync_to_async(_definitions)(_caller(ctx))
    return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in rendered])


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    """One call through the runtime pipeline, as ``POST /api/v1/runtime/execute`` runs it (members and up).

    A tool's failure, a name outside the agent's tools and a refused approval are error results
    (``isError``) with the pipeline's message; a call that needs a human's approval waits for it,
    without a thread or a database connection, like execute does."""
    caller = _caller(ctx)
    if not caller.actor.can(Role.MEMBER):
        raise MCPError(
            code=types.INVALID_REQUEST,
            message="Calling tools needs the member role or higher; "
            f"this API key has the {caller.actor.role} role.",
            data={"code": "permission_denied"},
        )
    if len(params.name) > MAX_TOOL_NAME_CHARS:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"Tool name is longer than {MAX_TOOL_NAME_CHARS} characters.",
            data={"code": "invalid"},
        )
    relay = _Relay(ctx)
    try:
        with notices.listening(relay.listener):
            step = await sync_to_async(_begin)(caller, params.name, dict(params.arguments or {}), relay)
            outcome = step if isinstance(step, gateway.CallOutcome) else await finish_after_decision(step)
    finally:
        await relay.drain()
    return to_mcp_result(outcome)


class _Relay:
    """A bridged server's progress and log messages during one ``tools/call``, sent to this request's
    client on the request's own stream (an SSE response; a client that asked for a JSON response gets
    none), in the order they came, before the result. Progress needs the client's ``progressToken``;
    log messages are those at the client's level or above (:func:`log_levels`)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx = ctx
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[str, tuple[Any, ...]] | None] = asyncio.Queue()
        self.token = _progress_token(ctx)
        self.listener = notices.Listener(
            progress=self._progress if self.token is not None else None,
            log=self._log,
            ask=self._ask if ctx.session.can_send_request else None,
        )
        self.task = self.loop.create_task(self._send())

    def _ask(self, kind: str, params: Any) -> Awaitable[Any]:
        """Ask this call's client (from the connection's loop): the request goes out on this call's
        stream; its answer comes back as a POST of its own (``relay``)."""
        future = asyncio.run_coroutine_threadsafe(self._request(kind, params), self.loop)
        return asyncio.wrap_future(future)

    async def _request(self, kind: str, params: Any) -> Any:
        request: types.ServerRequest
        result: type[types.CreateMessageResult] | type[types.ElicitResult]
        if kind == "sampling":
            request, result = types.CreateMessageRequest(params=params), types.CreateMessageResult
        else:
            request, result = types.ElicitRequest(params=params), types.ElicitResult
        try:
            return await self.ctx.session.send_request(
                request,
                result,
                request_read_timeout_seconds=ASK_SECONDS,
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
            )
        except MCPError as exc:
            return types.ErrorData(code=exc.error.code, message=exc.error.message)
        except TimeoutError:
            return types.ErrorData(
                code=types.REQUEST_TIMEOUT, message=f"The client did not answer within {ASK_SECONDS:g}s."
            )

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, ("progress", (progress, total, message)))

    def _log(self, level: str, data: Any, logger: str | None) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, ("log", (level, data, logger)))

    async def _send(self) -> None:
        session, request_id = self.ctx.session, self.ctx.request_id
        while (item := await self.queue.get()) is not None:
            kind, values = item
            try:
                if kind == "progress":
                    assert self.token is not None
                    progress, total, message = values
                    await session.send_progress_notification(
                        self.token, progress, total, message, related_request_id=str(request_id)
                    )
                else:
                    level, data, name = values
                    await session.send_log_message(level, data, name, related_request_id=request_id)
            except Exception:  # the client went away: the call still finishes and is recorded
                logger.debug("MCP endpoint: a notification could not be sent", exc_info=True)

    async def drain(self) -> None:
        """Send what is queued (everything the call said before it returned), then stop."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        await self.task


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> str | int | None:
    meta: Any = ctx.meta or {}
    token = meta.get("progressToken", meta.get("progress_token"))
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


ASK_SECONDS = 300.0  # how long a relayed sampling or elicitation request waits for the client's answer
LOG_LEVEL_SECONDS = 24 * 3600  # how long a ``logging/setLevel`` is remembered
DEFAULT_LOG_LEVEL = "info"


def _log_level_key(caller: Caller) -> str:
    return f"mcp-log-level:{caller.actor.tenant.pk}:{caller.actor.id}:{caller.agent.key}"


def log_levels(caller: Caller, protocol_version: str, meta: Any) -> frozenset[str]:
    """The log levels a call's client hears. On 2026-07-28 the request says (``_meta``
    ``io.modelcontextprotocol/logLevel``; none without it). On the handshake versions, the level of
    the last ``logging/setLevel`` by the same key for the same agent (the endpoint is stateless: the
    level is remembered per key and agent, a day), else ``info``."""
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return frozenset(allowed_log_levels(protocol_version, meta))
    return notices.at_least(cache.get(_log_level_key(caller)) or DEFAULT_LOG_LEVEL)


async def set_logging_level(
    ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """``logging/setLevel`` (viewers and up): the level of the log messages this key's later calls to
    the agent's tools hear from their servers."""
    caller = _caller(ctx)
    await sync_to_async(cache.set)(_log_level_key(caller), str(params.level), LOG_LEVEL_SECONDS)
    return types.EmptyResult()


def to_mcp_result(outcome: gateway.CallOutcome) -> types.CallToolResult:
    """A pipeline outcome as an MCP result. An MCP tool's result that holds more than text passes on
    block by block, as its server sent it (text, images, audio, embedded resources, resource links),
    scrubbed by the pipeline; any other result is ``for_llm`` (scrubbed) as the text, followed by its
    images and audio. Its structured content (scrubbed) is ``structuredContent`` when it is a JSON
    object; ``is_error`` is ``isError``. Other extras of a result are not passed on: they are not
    scrubbed. The call's id is in ``_meta``."""
    result = outcome.result
    blocks = [block for block in result.data.get("content") or () if isinstance(block, dict)]
    content = _blocks(blocks) if blocks and "server" in result.data and not result.is_error else None
    if content is None:
        content = [types.TextContent(text=result.for_llm)]
        for block in blocks:
            if block.get("type") in MEDIA_TYPES:
                content.append(_media(block))
    structured = result.data.get("structured_content")
    if not isinstance(structured, dict) or not _is_json(structured):
        structured = None
    return types.CallToolResult(
        content=content,
        structured_content=structured,
        is_error=result.is_error,
        _meta={f"{META_PREFIX}call_id": outcome.call_id},
    )


def _media(block: dict[str, Any]) -> types.ContentBlock:
    media = types.ImageContent if block["type"] == "image" else types.AudioContent
    return media(data=str(block.get("data", "")), mime_type=str(block.get("mime_type", "")))


def _blocks(blocks: list[dict[str, Any]]) -> list[types.ContentBlock] | None:
    """The blocks of an MCP tool's result as MCP content, or None when a text is over the bound of
    ``for_llm`` (which is then used: it is truncated)."""
    content: list[types.ContentBlock] = []
    texts = 0
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
            texts += len(text)
            content.append(types.TextContent(text=text))
        elif kind in MEDIA_TYPES:
            content.append(_media(block))
        elif kind == "resource":
            uri, mime_type = str(block.get("uri", "")), block.get("mime_type")
            resource: types.TextResourceContents | types.BlobResourceContents
            if isinstance(block.get("text"), str):
                texts += len(block["text"])
                resource = types.TextResourceContents(uri=uri, mime_type=mime_type, text=block["text"])
            else:
                resource = types.BlobResourceContents(
                    uri=uri, mime_type=mime_type, blob=str(block.get("blob", ""))
                )
            content.append(types.EmbeddedResource(resource=resource))
        elif kind == "resource_link":
            content.append(
                types.ResourceLink(
                    uri=str(block.get("uri", "")),
                    name=str(block.get("name", "")),
                    description=block.get("description"),
                    mime_type=block.get("mime_type"),
                )
            )
    if texts > MAX_RESULT_TEXT_CHARS:
        return None
    return content


def _for(caller: Caller) -> mcp_features.For:
    return mcp_features.For(
        actor=caller.actor,
        agent=caller.agent,
        scope=caller.scope,
        tool_allow=caller.tool_allow,
        session_key=caller.session_key,
    )


def _in_request(caller: Caller, work: Any, *args: Any) -> Any:
    token = _bind(caller)
    try:
        return work(_for(caller), *args)
    finally:
        request_context.reset(token)
        close_old_connections()


async def list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    """The resources of the agent's MCP servers that its grants and the policy give it (viewers and up)."""
    found = await sync_to_async(_in_request)(_caller(ctx), mcp_features.list_resources)
    return types.ListResourcesResult(resources=found)


async def list_resource_templates(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    found = await sync_to_async(_in_request)(_caller(ctx), mcp_features.list_resource_templates)
    return types.ListResourceTemplatesResult(resource_templates=found)


ERROR_CODES = {
    "invalid": types.INVALID_PARAMS,
    "not_found": types.INVALID_PARAMS,
    "conflict": types.INVALID_PARAMS,
    "too_many": types.INVALID_PARAMS,
    "rate_limited": types.INVALID_REQUEST,
}


def _member(caller: Caller, what: str) -> None:
    if not caller.actor.can(Role.MEMBER):
        raise MCPError(
            code=types.INVALID_REQUEST,
            message=f"{what} needs the member role or higher; this API key has the {caller.actor.role} role.",
            data={"code": "permission_denied"},
        )


async def _feature(caller: Caller, work: Any, *args: Any, about: dict[str, Any]) -> Any:
    try:
        return await sync_to_async(_in_request)(caller, work, *args)
    except mcp_features.FeatureRefused as exc:
        raise MCPError(
            code=ERROR_CODES.get(exc.code, types.INTERNAL_ERROR),
            message=str(exc),
            data={"code": exc.code, **about},
        ) from None


async def read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """One resource, from the one server of the agent's that offers it (members and up, like a call):
    scrubbed, bounded and recorded like a tool call."""
    caller = _caller(ctx)
    _member(caller, "Reading resources")
    uri = str(params.uri)
    result: types.ReadResourceResult = await _feature(
        caller, mcp_features.read_resource, uri, about={"uri": uri[: mcp_features.MAX_URI_CHARS]}
    )
    return result


async def subscribe_resource(
    ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    """``resources/subscribe`` (members and up, like a read): updates then come on ``GET`` of this
    endpoint with the same key."""
    caller = _caller(ctx)
    _member(caller, "Subscribing to resources")
    uri = str(params.uri)
    await _feature(caller, mcp_features.subscribe, uri, about={"uri": uri[: mcp_features.MAX_URI_CHARS]})
    return types.EmptyResult()


async def unsubscribe_resource(
    ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    caller = _caller(ctx)
    _member(caller, "Subscribing to resources")
    uri = str(params.uri)
    await _feature(caller, mcp_features.unsubscribe, uri, about={"uri": uri[: mcp_features.MAX_URI_CHARS]})
    return types.EmptyResult()


def _list_changed(method: str, meta: dict[str, Any]) -> types.ServerNotification:
    kinds: dict[str, Any] = {
        "notifications/tools/list_changed": types.ToolListChangedNotification,
        "notifications/prompts/list_changed": types.PromptListChangedNotification,
        "notifications/resources/list_changed": types.ResourceListChangedNotification,
    }
    notification: types.ServerNotification = kinds[method](params=types.NotificationParams(_meta=meta))
    return notification


MAX_LISTEN_URIS = 100  # resources one subscriptions/listen stream may watch


async def subscriptions_listen(
    ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    """``subscriptions/listen`` (2026-07-28): the response is the stream of the updates of the resources
    it names (members and up, as ``resources/subscribe``): each is subscribed as by that method for
    the stream's life, and its ``notifications/resources/updated`` follow the acknowledgment, stamped
    with the stream's id; and the list changes it asks for (tools, prompts, resources), sent whenever
    the tenant's configuration changes."""
    caller = _caller(ctx)
    uris = [str(uri) for uri in params.notifications.resource_subscriptions or ()]
    if len(uris) > MAX_LISTEN_URIS:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"At most {MAX_LISTEN_URIS} resources per stream.",
            data={"code": "invalid"},
        )
    if uris:
        _member(caller, "Subscribing to resources")
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    layer = get_channel_layer()
    assert layer is not None, "settings.CHANNEL_LAYERS is always configured"
    channel = await layer.new_channel()
    groups = subscriptions.stream_groups(str(caller.actor.tenant.pk), str(caller.actor.id), caller.agent.key)
    for group in groups:
        await layer.group_add(group, channel)
    wanted = params.notifications
    lists = {
        "notifications/tools/list_changed": bool(wanted.tools_list_changed),
        "notifications/prompts/list_changed": bool(wanted.prompts_list_changed),
        "notifications/resources/list_changed": bool(wanted.resources_list_changed),
    }
    made: list[str] = []
    try:
        for uri in uris:
            if await _feature(caller, mcp_features.subscribe, uri, about={"uri": uri[:200]}):
                made.append(uri)
        honored = types.SubscriptionFilter(
            tools_list_changed=wanted.tools_list_changed or None,
            prompts_list_changed=wanted.prompts_list_changed or None,
            resources_list_changed=wanted.resources_list_changed or None,
            resource_subscriptions=uris or None,
        )
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            ),
            related_request_id=ctx.request_id,
        )
        watched = set(uris)
        while True:
            event = await layer.receive(channel)
            uri = str((event.get("params") or {}).get("uri", ""))
            if event.get("method") == subscriptions.UPDATED and uri in watched:
                update = types.ResourceUpdatedNotification(
                    params=types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)
                )
                await ctx.session.send_notification(update, related_request_id=ctx.request_id)
            elif event.get("method") == subscriptions.LISTS_CHANGED:
                for method, on in lists.items():
                    if on:
                        await ctx.session.send_notification(
                            _list_changed(method, meta), related_request_id=ctx.request_id
                        )
    finally:
        with anyio.CancelScope(shield=True):
            for group in groups:
                await layer.group_discard(group, channel)
            for uri in made:  # what this stream subscribed ends with it
                with contextlib.suppress(Exception):
                    await sync_to_async(_in_request)(caller, mcp_features.unsubscribe, uri)


async def list_prompts(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    """The prompts of the agent's MCP servers that its grants and the policy give it, under their
    registered names (viewers and up)."""
    found = await sync_to_async(_in_request)(_caller(ctx), mcp_features.list_prompts)
    return types.ListPromptsResult(prompts=found)


async def get_prompt(
    ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    """One prompt, from its server (members and up): scrubbed, bounded and recorded like a tool call."""
    caller = _caller(ctx)
    _member(caller, "Getting prompts")
    name = str(params.name)
    result: types.GetPromptResult = await _feature(
        caller,
        mcp_features.get_prompt,
        name,
        params.arguments,
        about={"name": name[: mcp_features.MAX_NAME_CHARS]},
    )
    return result


async def complete(
    ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
) -> types.CompleteResult:
    """Completion of a prompt's or a resource template's argument, by the server that offers it (viewers
    and up)."""
    context = params.context.arguments if params.context is not None else None
    result: types.CompleteResult = await _feature(
        _caller(ctx), mcp_features.complete, params.ref, params.argument, context, about={}
    )
    return result


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def build() -> Server[Any]:
    """The MCP server (one per process; every request is served statelessly)."""
    return Server(
        "toolgate",
        title="Toolgate",
        instructions="The tools this agent may use, as Toolgate's policy allows them for this API key "
        "and call scope. Every call is checked, approved when it must be, run, scrubbed and recorded.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe_resource,
        on_unsubscribe_resource=unsubscribe_resource,
        on_subscriptions_listen=subscriptions_listen,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_logging_level,
    )
