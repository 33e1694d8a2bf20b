"""The ASGI application of ``/mcp/<agent key>/``: everything Toolgate decides before the MCP SDK
handles a request, and the SDK's session manager (stateless) that handles it.

Before the SDK:

1. the API key: ``Authorization: Bearer <key>``, checked by the REST API's own authentication class
   (a missing, malformed, revoked or expired key is 401);
2. the agent: the key's tenant's agent with that key, or 404 (another tenant's agent answers exactly
   like a missing one);
3. the call scope, from the query string (``user_id``, ``channel``, ``chat_id``, ``provider``,
   ``session_key``, ``subagent_depth``, ``tool_allow``, ``style``), validated like the REST listing's
   (unknown parameters are refused): 400; one of Toolgate's internal channels: 403. There is no
   origin parameter: calls have the key's origin (:mod:`apps.runtime.caller`).

Errors are JSON-RPC error objects (``id`` null) with Toolgate's error code in ``error.data.code``.
POST carries every request, and a client's answer to a request Toolgate sent it during a call
(``relay``); GET with ``Accept: text/event-stream`` is the key's update stream (resource
subscriptions); anything else is 405 (stateless: there is no session to end).
The SDK then applies the body limit (``MAX_REQUEST_BODY_BYTES``: 413) and its DNS-rebinding
protection (Host and Origin against ``ALLOWED_HOSTS`` and ``CSRF_TRUSTED_ORIGINS``: 421 and 403).

Each request runs its database work in a thread of its own (``ThreadSensitiveContext``, as Django does
for a request) and gives its connection back after each piece of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import time
import uuid
import weakref
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.db import InterfaceError, OperationalError, close_old_connections
from django.http import Http404, QueryDict
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST, PARSE_ERROR
from psycopg_pool import PoolTimeout
from rest_framework import exceptions
from rest_framework.serializers import CharField, ChoiceField

from apps.audit import context as request_context
from apps.mcp_grants import subscriptions
from apps.policy.engine import CallScope
from apps.runtime import caller
from apps.runtime.mcp_endpoint import relay, server
from apps.runtime.quota_limits import api_request_refusal
from apps.tenants import database
from apps.tenants.access import access_runtime_agent
from apps.tenants.api.parsers import strict_json
from apps.tenants.authentication import ApiKeyAuthentication, TenantSuspended
from apps.tenants.errors import ErrorCode, Forbidden
from apps.toolkit.call_scope import CallScopeQueryInput
from apps.toolkit.presentation import STYLES

logger = logging.getLogger("toolgate.request")

# ``/mcp/<agent key>`` with or without the trailing slash; anything else under /mcp/ is Django's 404.
PATH_PATTERN = re.compile(r"^/mcp/(?P<key>[^/]{1,200})/?$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
MAX_QUERY_CHARS = 12 * 1024  # daphne refuses request lines over 16 KiB itself


class EndpointQueryInput(CallScopeQueryInput):
    """The call scope of every request to one endpoint URL (an MCP client is configured with one URL)."""

    session_key = CharField(max_length=200, required=False, allow_blank=True, default="")
    style = ChoiceField(choices=STYLES, required=False, default="flat")  # type: ignore[assignment]


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str
    details: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # more of the answer's (a quota's 429)


class _HeaderRequest:
    """What the REST API's authentication class reads of a request: its headers, in WSGI form."""

    def __init__(self, authorization: str) -> None:
        self.META = {"HTTP_AUTHORIZATION": authorization} if authorization else {}


def identify(
    *, authorization: str, agent_key: str, query: str, request_id: str, ip: str | None
) -> server.Caller | Refusal:
    """The caller of one request, or why it is refused (401, 404, 400: in this order, as REST does)."""
    try:
        return _identify(
            authorization=authorization, agent_key=agent_key, query=query, request_id=request_id, ip=ip
        )
    finally:
        close_old_connections()


def _identify(
    *, authorization: str, agent_key: str, query: str, request_id: str, ip: str | None
) -> server.Caller | Refusal:
    try:
        authenticated = ApiKeyAuthentication().authenticate(_HeaderRequest(authorization))  # type: ignore[arg-type]
    except exceptions.AuthenticationFailed as exc:
        return Refusal(401, ErrorCode.AUTHENTICATION_FAILED, str(exc.detail), {})
    except TenantSuspended as exc:
        return Refusal(403, ErrorCode.TENANT_SUSPENDED, str(exc.detail), {})
    if authenticated is None:
        return Refusal(
            401,
            ErrorCode.NOT_AUTHENTICATED,
            "Authentication credentials were not provided: use 'Authorization: Bearer <api key>'.",
            {},
        )
    actor = authenticated[1]
    over = api_request_refusal(actor.tenant)  # counted like a REST request
    if over is not None:
        return Refusal(
            429, str(over.default_code), str(over.detail), over.envelope_details, over.http_headers
        )
    try:
        agent = access_runtime_agent(actor=actor, key=agent_key)
    except Http404:
        return Refusal(404, ErrorCode.NOT_FOUND, "No agent with this key.", {})
    if len(query) > MAX_QUERY_CHARS:
        return Refusal(
            400, ErrorCode.INVALID, f"The query string is longer than {MAX_QUERY_CHARS} characters.", {}
        )
    try:
        fields = QueryDict(query).dict()
    except TooManyFieldsSent:
        return Refusal(400, ErrorCode.INVALID, "The query string has too many parameters.", {})
    data = EndpointQueryInput(data=fields)
    if not data.is_valid():
        details = {name: [str(m) for m in messages] for name, messages in data.errors.items()}
        first = next(iter(details.items()))
        return Refusal(400, ErrorCode.INVALID, f"Invalid query parameter {first[0]}: {first[1][0]}", details)
    params: dict[str, Any] = data.validated_data
    try:  # the internal channels carry rights in team tools that no request may claim
        caller.check_channel(actor=actor, channel=params["channel"])
    except Forbidden as exc:
        return Refusal(403, exc.code, exc.message, exc.details)
    return server.Caller(
        actor=actor,
        agent=agent,
        scope=CallScope(
            provider=params["provider"],
            user_id=params["user_id"],
            channel=params["channel"],
            chat_id=params["chat_id"],
            subagent_depth=params["subagent_depth"],
        ),
        session_key=params["session_key"],
        tool_allow=CallScopeQueryInput.tool_allow_names(params["tool_allow"]),
        style=params["style"],
        request_id=request_id,
        ip=ip,
    )


def transport_security() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection for the host names this deployment serves: ``ALLOWED_HOSTS``
    (any port) and, as origins, those hosts over http and https plus ``CSRF_TRUSTED_ORIGINS``.

    ``*`` in ``ALLOWED_HOSTS`` accepts any host, as Django does, and so turns the check off; a
    subdomain pattern (``.example.com``) is served on the bare domain only."""
    hosts = [h.lstrip(".") for h in settings.ALLOWED_HOSTS if h and h != "*"]
    if "*" in settings.ALLOWED_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = [
        f"{scheme}://{host}{port}" for host in hosts for scheme in ("http", "https") for port in ("", ":*")
    ]
    origins += [o for o in settings.CSRF_TRUSTED_ORIGINS if "*" not in o]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for host in hosts for h in (host, f"{host}:*")],
        allowed_origins=origins,
    )


class _Managers:
    """One running session manager per event loop (daphne has one), started on first use.

    The manager needs a task group that outlives requests; daphne has no lifespan events, so it runs in
    a task of its own, in a fresh context (no request's context variables)."""

    def __init__(self) -> None:
        self._ready: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Future[StreamableHTTPSessionManager]
        ]
        self._ready = weakref.WeakKeyDictionary()
        self._tasks: set[asyncio.Task[None]] = set()

    async def get(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        ready = self._ready.get(loop)
        if ready is None or (ready.done() and ready.exception() is not None):
            ready = loop.create_future()
            self._ready[loop] = ready
            task = loop.create_task(self._serve(ready), context=contextvars.Context())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(ready)

    @staticmethod
    async def _serve(ready: asyncio.Future[StreamableHTTPSessionManager]) -> None:
        manager = relay.RelaySessionManager(
            app=server.build(),
            stateless=True,
            security_settings=transport_security(),
            max_request_body_size=settings.MAX_REQUEST_BODY_BYTES,
        )
        try:
            async with manager.run():
                ready.set_result(manager)
                await asyncio.Event().wait()  # for the life of the loop
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else RuntimeError("MCP endpoint stopped")
                )
            raise


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


DATABASE_UNAVAILABLE = Refusal(503, "database_unavailable", database.MESSAGE, {})
NOT_POST = Refusal(
    405,
    ErrorCode.METHOD_NOT_ALLOWED,
    "Only POST, and GET of the update stream (Accept: text/event-stream), are served: this endpoint is "
    "stateless.",
    {},
)
KEEPALIVE_SECONDS = 15.0


async def _stream_updates(found: server.Caller, receive: Any, send: Any) -> None:
    """``GET``: the stream of this key's (or user's) updates for this agent, as SSE: the
    ``notifications/resources/updated`` of the resources it subscribed to (``apps.mcp_grants.
    subscriptions``), from whichever web worker's server connection they come, and the tools, prompts
    and resources ``list_changed`` notifications whenever the tenant's configuration changes; a comment
    every :data:`KEEPALIVE_SECONDS`. It holds no database connection, and ends when the client goes."""
    layer = get_channel_layer()
    assert layer is not None, "settings.CHANNEL_LAYERS is always configured"
    channel = await layer.new_channel()
    groups = subscriptions.stream_groups(str(found.actor.tenant.pk), str(found.actor.id), found.agent.key)
    for group in groups:
        await layer.group_add(group, channel)
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-store")]

    async def disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(disconnect())
    getter: asyncio.Future[Any] = asyncio.ensure_future(layer.receive(channel))
    try:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b": updates\n\n", "more_body": True})
        while not gone.done():
            await asyncio.wait({getter, gone}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                event = getter.result()
                getter = asyncio.ensure_future(layer.receive(channel))
                for message in _notifications(event):
                    body = f"event: message\ndata: {json.dumps(message)}\n\n".encode()
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            elif not gone.done():
                await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
    except OSError:  # the client went away mid-write
        pass
    finally:
        getter.cancel()
        gone.cancel()
        for group in groups:
            await layer.group_discard(group, channel)


def _notifications(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON-RPC notifications of one channel-layer message of ``apps.mcp_grants.subscriptions``."""
    if event.get("method") == subscriptions.LISTS_CHANGED:
        return [{"jsonrpc": "2.0", "method": method} for method in subscriptions.LIST_CHANGED]
    return [{"jsonrpc": "2.0", "method": event.get("method"), "params": event.get("params")}]


async def _refuse(
    send: Any, refusal: Refusal, *, allow: bytes = b"", rpc_code: int = INVALID_REQUEST
) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": rpc_code,
                "message": refusal.message,
                "data": {"code": refusal.code, "details": refusal.details},
            },
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="toolgate"'))
    if allow:
        headers.append((b"allow", allow))
    if refusal.status == 503:
        headers.append((b"retry-after", b"5"))
    headers += [(name.lower().encode(), value.encode()) for name, value in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _strict_body(receive: Any) -> tuple[Refusal | None, Any, bytes]:
    """Read the request body and hold it to the execute route's JSON rules (no non-finite numbers or
    duplicate keys, bounded nesting; a NUL character goes on to the pipeline, which refuses the call as
    invalid and records it, as it does for the REST API): a refusal, or None and a ``receive`` that
    replays the body for the SDK. A body over the size limit is left to the SDK (its 413)."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body"))
        if size > settings.MAX_REQUEST_BODY_BYTES:
            break
    body = b"".join(chunks)
    if not more and size <= settings.MAX_REQUEST_BODY_BYTES:
        try:
            strict_json(body.decode("utf-8"), allow_nul=True)
        except (exceptions.ParseError, UnicodeDecodeError) as exc:
            detail = exc.detail if isinstance(exc, exceptions.ParseError) else f"JSON parse error - {exc}"
            return Refusal(400, ErrorCode.MALFORMED_JSON, str(detail), {}), receive, b""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": more}

    return None, replay, body if not more else b""


class MCPEndpoint:
    """ASGI application for ``/mcp/<agent key>/`` (``config.asgi`` routes the path here)."""

    def __init__(self) -> None:
        self._managers = _Managers()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = PATH_PATTERN.match(scope["path"])
        assert match is not None, "config.asgi routes only matching paths here"
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        client = scope.get("client")
        ip = str(client[0]) if client else None
        status = 0

        async def send_with_id(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (b"x-request-id", request_id.encode())],
                }
            await send(message)

        started = time.monotonic()
        token = request_context.bind(request_context.RequestContext(request_id=request_id, ip=ip))
        try:
            async with ThreadSensitiveContext():
                try:
                    try:
                        found = await sync_to_async(identify)(
                            authorization=_header(scope, b"authorization"),
                            agent_key=match["key"],
                            query=bytes(scope.get("query_string", b"")).decode("latin-1"),
                            request_id=request_id,
                            ip=ip,
                        )
                    except (OperationalError, InterfaceError, PoolTimeout):
                        found = DATABASE_UNAVAILABLE
                    if isinstance(found, Refusal):
                        await _refuse(send_with_id, found)
                        return
                    if scope["method"] == "GET" and "text/event-stream" in _header(scope, b"accept"):
                        await _stream_updates(found, receive, send_with_id)
                        return
                    if scope["method"] != "POST":
                        # Stateless: no session to end (DELETE); the transport's answer is 405.
                        await _refuse(send_with_id, NOT_POST, allow=b"GET, POST")
                        return
                    refused, receive, body = await _strict_body(receive)
                    if refused is not None:
                        await _refuse(send_with_id, refused, rpc_code=PARSE_ERROR)
                        return
                    reply = relay.reply_of(body)
                    if reply is not None:  # a client's answer to a request of Toolgate's (``relay``)
                        await relay.deliver(str(found.actor.tenant.pk), str(found.actor.id), reply)
                        await send_with_id({"type": "http.response.start", "status": 202, "headers": []})
                        await send_with_id({"type": "http.response.body", "body": b""})
                        return
                    manager = await self._managers.get()
                    await manager.handle_request({**scope, server.CALLER_KEY: found}, receive, send_with_id)
                finally:
                    await sync_to_async(close_old_connections)()
        finally:
            logger.info(
                "%s %s %s",
                scope.get("method", ""),
                scope["path"],
                status,
                extra={"status": status, "duration_ms": round((time.monotonic() - started) * 1000, 1)},
            )
            request_context.reset(token)
