"""Requests from Toolgate to an MCP client during one of its ``tools/call`` requests (a bridged server's
``sampling/createMessage`` and ``elicitation/create``, relayed), on an endpoint without sessions.

On the handshake protocol versions a server may send a request on the SSE response of the client's
POST; the client answers with a POST of its own, which in a stateless deployment can reach any web
worker, with no session id to route it by. So:

- every request Toolgate sends on a call's stream gets an id of its own, ``tg-`` and 32 random hex
  digits (:class:`_Ids`), unguessable and unique across workers; the client answers under that id;
- a POST whose body is a JSON-RPC *response* with such an id (:func:`reply_of`) is handed, after the
  usual authentication, to the call that waits for it: in this process when it is here (:data:`_WAITING`),
  else through the channel layer to the worker that holds it (group ``mcp-reply.<tenant>.<id>``). It is
  answered 202, like any response a stateless MCP server receives;
- the reply counts only when it comes with the same tenant and the same API key as the call: anyone
  else's is dropped.

On 2026-07-28 the protocol forbids server-to-client requests (its multi round-trip results replace
them): the SDK masks them off there, and the bridged server's request is answered as when there is no
client (``apps.mcp_grants.notices``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from channels.layers import get_channel_layer
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import DEFAULT_NEGOTIATED_VERSION, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from pydantic import ValidationError

from apps.runtime.mcp_endpoint.server import CALLER_KEY

logger = logging.getLogger(__name__)

ID_PREFIX = "tg-"
ID_CHARS = len(ID_PREFIX) + 32


@dataclass(frozen=True)
class _Waiter:
    tenant_id: str
    actor_id: str
    transport: RelayTransport
    original_id: str | int


_WAITING: dict[str, _Waiter] = {}  # this process's requests sent to clients, by the id the client sees


def _group(tenant_id: str, request_id: str) -> str:
    return f"mcp-reply.{tenant_id}.{request_id}"


class RelayTransport(StreamableHTTPServerTransport):
    """The SDK's transport for one POST, which also takes the client's answers to the requests sent
    on its response (:meth:`deliver`)."""

    async def deliver(self, message: JSONRPCResponse | JSONRPCError) -> None:
        writer = self._read_stream_writer
        if writer is not None:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await writer.send(SessionMessage(message))


class _Ids:
    """The write side of one POST's server: a request to the client leaves under an id of its own
    (registered in :data:`_WAITING`, and with the channel layer); the answer is given back under the
    dispatcher's id."""

    def __init__(self, inner: Any, transport: RelayTransport, tenant_id: str, actor_id: str) -> None:
        self.inner, self.transport = inner, transport
        self.tenant_id, self.actor_id = tenant_id, actor_id
        self.sent: list[str] = []
        self.group: anyio.abc.TaskGroup | None = None

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest):
            request_id = ID_PREFIX + secrets.token_hex(16)
            _WAITING[request_id] = _Waiter(self.tenant_id, self.actor_id, self.transport, message.id)
            self.sent.append(request_id)
            if self.group is not None:  # listening before the client can answer
                ready = anyio.Event()
                self.group.start_soon(self._listen, request_id, ready)
                await ready.wait()
            item = SessionMessage(message.model_copy(update={"id": request_id}), item.metadata)
        await self.inner.send(item)

    async def _listen(self, request_id: str, ready: anyio.Event) -> None:
        """Answers that reach another worker come here through the channel layer."""
        layer = get_channel_layer()
        if layer is None:
            ready.set()
            return
        group = _group(self.tenant_id, request_id)
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        finally:
            ready.set()
        try:
            while request_id in _WAITING:
                event = await layer.receive(channel)
                if event.get("actor") == self.actor_id and isinstance(event.get("message"), dict):
                    await deliver_local(self.tenant_id, self.actor_id, event["message"])
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

    def forget(self) -> None:
        for request_id in self.sent:
            _WAITING.pop(request_id, None)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Ids:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def reply_of(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC response in ``body`` when it answers one of Toolgate's requests (its id has
    Toolgate's form), else None."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if (
        not isinstance(message, dict)
        or "method" in message
        or not ("result" in message or "error" in message)
    ):
        return None
    request_id = message.get("id")
    if not isinstance(request_id, str) or len(request_id) != ID_CHARS or not request_id.startswith(ID_PREFIX):
        return None
    return message


async def deliver_local(tenant_id: str, actor_id: str, message: dict[str, Any]) -> bool:
    """Hand ``message`` to the call in this process that waits for it; False when none here does."""
    waiter = _WAITING.get(str(message.get("id")))
    if waiter is None:
        return False
    if (waiter.tenant_id, waiter.actor_id) != (tenant_id, actor_id):
        return True  # someone else's answer: dropped, and said nothing of
    try:
        answer: JSONRPCResponse | JSONRPCError = (
            JSONRPCError.model_validate({**message, "id": waiter.original_id})
            if "error" in message
            else JSONRPCResponse.model_validate({**message, "id": waiter.original_id})
        )
    except ValidationError:
        logger.info("MCP endpoint: a malformed answer to request %s was dropped", message.get("id"))
        return True
    _WAITING.pop(str(message["id"]), None)
    await waiter.transport.deliver(answer)
    return True


async def deliver(tenant_id: str, actor_id: str, message: dict[str, Any]) -> None:
    """Hand a client's answer to the call waiting for it, here or on another worker."""
    if await deliver_local(tenant_id, actor_id, message):
        return
    layer = get_channel_layer()
    if layer is not None:
        group = _group(tenant_id, str(message["id"]))
        await layer.group_send(group, {"type": "mcp.reply", "actor": actor_id, "message": message})


class RelaySessionManager(StreamableHTTPSessionManager):
    """The SDK's stateless session manager, with requests to the client allowed on a call's SSE
    response and their answers routed back (module docstring). Everything else is the SDK's."""

    async def _handle_stateless_request(
        self, protocol_version_hint: str | None, scope: Any, receive: Any, send: Any
    ) -> None:
        caller = scope.get(CALLER_KEY)
        tenant_id = str(caller.actor.tenant.pk) if caller is not None else ""
        actor_id = str(caller.actor.id) if caller is not None else ""
        transport = RelayTransport(
            mcp_session_id=None,
            is_json_response_enabled=self.json_response,
            event_store=None,
            security_settings=self.security_settings,
        )
        can_ask = not self.json_response and bool(tenant_id)

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream), anyio.create_task_group() as group:
                task_status.started()
                ids = _Ids(write_stream, transport, tenant_id, actor_id)
                ids.group = group
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream,
                    ids,
                    inline_methods=frozenset({"initialize"}),
                    transport_builder=lambda _md: TransportContext(
                        kind="streamable-http", can_send_request=can_ask
                    ),
                )
                connection = Connection.from_envelope(
                    protocol_version_hint
                    if protocol_version_hint is not None
                    else DEFAULT_NEGOTIATED_VERSION,
                    None,
                    None,
                )
                try:
                    await serve_connection(
                        self.app, dispatcher, connection=connection, lifespan_state=self._lifespan_state
                    )
                except Exception:
                    logger.exception("MCP endpoint: a stateless request crashed")
                finally:
                    ids.forget()
                    group.cancel_scope.cancel()

        assert self._task_group is not None
        try:
            await self._task_group.start(run)
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
