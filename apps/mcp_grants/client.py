"""Connections to MCP servers, made with the ``mcp`` SDK over stdio, SSE and streamable HTTP.

One :class:`Manager` per process owns every connection of that process on an event loop of its own (a
daemon thread), so synchronous callers (the pipeline, background jobs) and asynchronous ones share them:

- **reused**: one session per (server, user with credentials of their own), kept open across calls; a
  new process or session is made only when the server's configuration changed or the old one died;
- **isolated per tenant**: servers are tenant rows, so two tenants never share a connection (or a
  stdio process), even for the same command; a user with credentials of their own gets their own;
- **health**: every ``TOOLGATE_MCP_HEALTH_SECONDS`` (30) each connection is pinged ("method not
  found" counts as healthy); 3 failures in a row, a transport that closed (a stdio server's process
  that exited is seen at once, by its output closing), or a call that found the connection gone mark
  it disconnected, and it is reconnected in the background with the backoff of
  SPEC B §3.5 (2 s doubling to 60 s, 10 attempts, then a 5-minute cooldown and again);
- **bounded**: connecting, discovery (15 s) and every call (the server's ``timeout_sec``) have
  deadlines; a hung or crashed server gives a clear error in time and never blocks other servers.

What several processes must agree on lives in the database: the discovered tools (``MCPServerTool``,
written with ``config_changed`` when they change) and the server's status and last health result,
published live on the tenant's ``mcp`` topic when the status changes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpcore2
import httpx2
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone
from mcp.client._input_required import run_input_required_driver
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import PaginatedRequestParams
from mcp_types import (
    CONNECTION_CLOSED,
    LOG_LEVEL_META_KEY,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    UNSUPPORTED_PROTOCOL_VERSION,
    CreateMessageRequest,
    ElicitRequest,
    ErrorData,
    InputRequiredResult,
    ResourceUpdatedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from apps.mcp_grants import collisions, naming, notices, subscriptions
from apps.mcp_grants.models import MCPServer, MCPServerTool, UserCredential
from apps.realtime import events
from apps.tenants.models import Tenant
from apps.tenants.services import config_changed
from apps.toolkit import jail
from apps.toolkit.ssrf import AddressPolicy, SSRFBlocked
from apps.toolkit.workspace import workspace_root

logger = logging.getLogger(__name__)
T = TypeVar("T")

HEALTH_SECONDS_SETTING = "TOOLGATE_MCP_HEALTH_SECONDS"
HEALTH_FAIL_THRESHOLD = 3
INITIAL_BACKOFF = 2.0
MAX_BACKOFF = 60.0
MAX_RECONNECT_ATTEMPTS = 10
RECONNECT_COOLDOWN = 300.0
DISCOVER_TIMEOUT = 15.0
CONNECT_TIMEOUT = 30.0
PING_TIMEOUT = 10.0
STDIO_INIT_ATTEMPTS = 4  # initialize retries of a stdio server: 2 s, 4 s, 8 s apart
MAX_TOOLS = 1000
# A stdio server's jail: a long-lived process gets an hour of CPU (then it is restarted by the health
# check's reconnect) and the jail's other default limits.
STDIO_LIMITS = jail.Limits(cpu_seconds=3600)
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION = 4000
# What OpenAI and Anthropic accept as a tool name (the registered name adds the server prefix).
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def backoff(attempt: int) -> float:
    """Seconds before reconnect attempt ``attempt`` (1-based): ``min(2 s * 2^(attempt-1), 60 s)``."""
    return float(min(INITIAL_BACKOFF * 2.0 ** (attempt - 1), MAX_BACKOFF))


def health_interval() -> float:
    """Seconds between two pings of a session (``TOOLGATE_MCP_HEALTH_SECONDS``)."""
    return max(0.2, float(getattr(settings, HEALTH_SECONDS_SETTING, 30)))


class MCPUnavailable(Exception):
    """The server cannot be reached now; the message says why and when it is tried again."""


class MCPTimeout(Exception):
    pass


@dataclass(frozen=True)
class Endpoint:
    """Everything needed to connect to one server (as one user, when they have credentials)."""

    tenant_id: str
    server_id: str
    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_key: str = ""
    timeout: float = 60.0
    user_id: str = ""  # set when the user's own credentials are used
    network: bool = False  # stdio: whether the server's jail has the network

    @property
    def key(self) -> tuple[str, str]:
        return (self.server_id, self.user_id)

    @property
    def fingerprint(self) -> str:
        raw = json.dumps(
            [
                self.transport,
                self.command,
                self.args,
                self.url,
                self.headers,
                self.env,
                self.api_key,
                self.network,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(raw.encode()).hexdigest()

    @property
    def secrets(self) -> list[str]:
        """Values that must never appear in a result or a log."""
        return [v for v in (self.api_key, *(v for _, v in self.headers), *(v for _, v in self.env)) if v]

    def http_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.api_key and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def process_env(self) -> dict[str, str]:
        """The SDK's minimal environment (PATH, USER, …; HOME is the jail's ``/workspace``, the server's
        own directory) plus the server's variables; a value ``env:NAME`` takes Toolgate's own value of
        an allowed variable (validated at registration)."""
        result = {**get_default_environment(), "HOME": jail.WORKDIR}
        for name, value in self.env:
            result[name] = os.environ.get(value[4:], "") if value.startswith("env:") else value
        return result


def endpoint_for(server: MCPServer, credential: UserCredential | None = None) -> Endpoint:
    headers, env, api_key, user_id = server.headers, server.env, server.api_key, ""
    if credential is not None:
        user_id = credential.user_id
        headers = {**headers, **credential.headers}
        env = {**env, **credential.env}
        api_key = credential.api_key or api_key
    return Endpoint(
        tenant_id=str(server.tenant_id),
        server_id=str(server.pk),
        name=server.name,
        transport=server.transport,
        command=server.command,
        args=tuple(str(a) for a in server.args),
        url=server.url,
        headers=tuple(sorted(headers.items())),
        env=tuple(sorted(env.items())),
        api_key=api_key,
        timeout=float(server.timeout_sec or 60),
        network=server.network,
        user_id=user_id,
    )


# --- HTTP through the SSRF guard ---------------------------------------------------------------------


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Every TCP connection goes to an address the SSRF guard vetted at connect time (no DNS rebinding
    between the check and the connection)."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await asyncio.to_thread(self._policy.resolve, host, port)
        except SSRFBlocked as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        last: Exception = httpcore2.ConnectError(f"{host}: no address")
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> Any:
        raise httpcore2.ConnectError("unix sockets are not reachable")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# A streamable-HTTP request's event stream is closed by the SDK's client as soon as the response event
# is in, a moment before the server ends it; closed unfinished, the connection would be dropped and the
# next call pay a new one. What is left is read first, within these bounds, so the connection is kept.
EVENT_STREAM_DRAIN_SECONDS = 0.05
EVENT_STREAM_DRAIN_BYTES = 64 * 1024


class _KeptEventStream(httpx2.AsyncByteStream):
    """The body of a POST answered with an event stream: closing it reads what the server still sends
    (normally nothing but the end of the stream) before closing, so the connection goes back to the pool.
    A server that keeps the stream open past the bounds loses the connection, as before."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._closed = False

    async def __aiter__(self) -> Any:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            left = EVENT_STREAM_DRAIN_BYTES
            # A failure to read the rest only means the connection is closed below, as it would have been.
            with anyio.move_on_after(EVENT_STREAM_DRAIN_SECONDS), contextlib.suppress(Exception):
                async for chunk in self._inner:
                    left -= len(chunk)
                    if left < 0:
                        break
        finally:
            await self._inner.aclose()


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            network_backend=_GuardedBackend(policy),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        if request.method == "POST" and content_type.startswith("text/event-stream"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _KeptEventStream(response.stream)
        return response


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(CONNECT_TIMEOUT, read=300.0),
        auth=auth,
        transport=_GuardedTransport(AddressPolicy.from_settings()),
        trust_env=False,
    )


def _stdio_cwd(endpoint: Endpoint) -> Path:
    path = workspace_root() / "tenants" / endpoint.tenant_id / "mcp" / endpoint.name
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _errlog(endpoint: Endpoint) -> Any:
    """Where a stdio server's stderr goes: a per-server log file beside its working directory."""
    return (_stdio_cwd(endpoint) / "stderr.log").open("a", buffering=1, encoding="utf-8", errors="replace")


@contextlib.asynccontextmanager
async def _open(
    endpoint: Endpoint,
    ended: asyncio.Event | None = None,
    inflight: notices.InFlight | None = None,
    updated: Callable[[str], Awaitable[None]] | None = None,
) -> Any:
    """A connected and initialized :class:`ClientSession` (the caller bounds the time). ``ended`` is set
    as soon as the server's side of the connection ends: for a stdio server, the moment its process
    exits (its output closes), without waiting for a ping or a call to fail. The server's log messages
    go to ``inflight`` (the call they belong to, when that can be told); ``updated(uri)`` hears its
    ``notifications/resources/updated``."""

    async def on_message(message: Any) -> None:
        if updated is not None and isinstance(message, ResourceUpdatedNotification):
            await updated(str(message.params.uri))

    for modern in (endpoint.key in _MODERN_ONLY, True):
        async with contextlib.AsyncExitStack() as stack:
            session, closed = await _connect_once(stack, endpoint, inflight, on_message)
            try:
                await _handshake(session, endpoint, modern)
            except _OnlyModern:
                continue  # this transport is the handshake era's now: a new one, with discover
            if ended is not None:
                follow = asyncio.ensure_future(_follow(closed, ended))
                stack.callback(follow.cancel)
            yield session
            return


async def _follow(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


async def _connect_once(
    stack: contextlib.AsyncExitStack,
    endpoint: Endpoint,
    inflight: notices.InFlight | None,
    on_message: Any,
) -> tuple[ClientSession, asyncio.Event]:
    """A transport to the server and a session on it, not yet initialized; the event is set when the
    server's side of the transport ends."""
    if endpoint.transport == MCPServer.Transport.STDIO:
        # The server runs in a jail of its own (apps.toolkit.jail): its directory is /workspace,
        # the network is off unless its registration turns it on, and nothing of Toolgate's data,
        # other tenants or Toolgate's environment is visible. No jail, no server.
        confined = jail.launch(
            jail.Jail(workspace=_stdio_cwd(endpoint), network=endpoint.network, limits=STDIO_LIMITS),
            [endpoint.command, *endpoint.args],
            cwd=jail.WORKDIR,
        )
        stack.callback(confined.cleanup)
        params = StdioServerParameters(
            command=confined.argv[0], args=confined.argv[1:], env=endpoint.process_env(), cwd="/"
        )
        errlog = stack.enter_context(_errlog(endpoint))
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    elif endpoint.transport == MCPServer.Transport.SSE:
        AddressPolicy.from_settings().check_url(endpoint.url)
        streams = await stack.enter_async_context(
            sse_client(endpoint.url, headers=endpoint.http_headers(), httpx_client_factory=_http_client)
        )
    else:
        AddressPolicy.from_settings().check_url(endpoint.url)
        client = await stack.enter_async_context(_http_client(headers=endpoint.http_headers()))
        streams = await stack.enter_async_context(streamable_http_client(endpoint.url, http_client=client))
    closed = asyncio.Event()
    read = await _watched(stack, streams[0], closed)
    session = await stack.enter_async_context(
        ClientSession(
            read,
            streams[1],
            logging_callback=inflight.on_log if inflight is not None else None,
            sampling_callback=inflight.on_sampling if inflight is not None else None,
            elicitation_callback=inflight.on_elicitation if inflight is not None else None,
            message_handler=on_message,
        )
    )
    return session, closed


# Servers (by endpoint key) found to speak 2026-07-28 only: connected with discover from then on.
_MODERN_ONLY: set[tuple[str, str]] = set()


class _OnlyModern(Exception):
    """The server refused the handshake for 2026-07-28: connect again, with ``server/discover``."""


async def _handshake(session: ClientSession, endpoint: Endpoint, modern: bool) -> None:
    """``initialize`` (the handshake versions, up to 2025-11-25). A server that refuses it for the
    2026-07-28 era (``-32022``, unsupported protocol version, naming only modern versions) is connected
    again with ``server/discover`` and spoken to with that version's per-request envelope."""
    if modern:
        try:
            await session.discover()
        except MCPError:
            _MODERN_ONLY.discard(endpoint.key)  # next time, the handshake again
            raise
        return
    try:
        await session.initialize()
    except MCPError as exc:
        supported = exc.error.data.get("supported") if isinstance(exc.error.data, dict) else None
        if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(supported, list):
            raise
        if not set(supported) & set(MODERN_PROTOCOL_VERSIONS):
            raise
        _MODERN_ONLY.add(endpoint.key)
        raise _OnlyModern() from None


def is_modern(session: ClientSession) -> bool:
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


MAX_INPUT_ROUNDS = 10


async def answered(first_try: Callable[..., Awaitable[Any]], listener: notices.Listener | None) -> Any:
    """A request on a 2026-07-28 connection that may answer with an ``InputRequiredResult`` (sampling,
    elicitation): ``first_try(responses, state)`` sends it; the input requests are answered as a
    handshake-era server's requests are (relayed to ``listener``'s client, or as when there is none:
    ``notices.InFlight``: elicitation declined, sampling refused) and the request retried with the
    answers, for at most :data:`MAX_INPUT_ROUNDS`."""
    inflight = notices.InFlight(requests=1, listeners=[listener] if listener is not None else [])

    async def dispatch(key: str, request: Any) -> Any:
        if isinstance(request, CreateMessageRequest):
            return await inflight.on_sampling(None, request.params)
        if isinstance(request, ElicitRequest):
            return await inflight.on_elicitation(None, request.params)
        return ErrorData(code=METHOD_NOT_FOUND, message="Toolgate offers no roots.")

    first = await first_try(None, None)
    if not isinstance(first, InputRequiredResult):
        return first
    return await run_input_required_driver(
        first, dispatch=dispatch, retry=first_try, max_rounds=MAX_INPUT_ROUNDS
    )


async def _modern_call(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    remaining: float,
    progress: Any,
    listener: notices.Listener | None,
) -> Any:
    """``tools/call`` on a 2026-07-28 connection: the log level wanted rides the request's ``_meta``,
    and a result that asks for input is answered (:func:`answered`)."""
    meta: Any = None
    if listener is not None and listener.levels:
        meta = {LOG_LEVEL_META_KEY: min(listener.levels, key=notices.LEVELS.index)}

    async def call(responses: Any = None, state: str | None = None) -> Any:
        return await session.call_tool(
            tool,
            args,
            read_timeout_seconds=remaining,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            meta=meta,
            allow_input_required=True,
        )

    return await answered(call, listener)


async def _watched(stack: contextlib.AsyncExitStack, source: Any, ended: asyncio.Event) -> Any:
    """The messages of ``source`` passed on unchanged through a stream of their own, setting ``ended``
    when ``source`` ends (the transport closed it: the server went away)."""
    sink, passed = anyio.create_memory_object_stream[Any](0)

    async def pump() -> None:
        try:
            async with sink:
                async for message in source:
                    await sink.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            ended.set()

    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(group.cancel_scope.cancel)
    group.start_soon(pump)
    stack.push_async_callback(passed.aclose)
    return passed


@dataclass
class ToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]
    title: str = ""
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def stored(self) -> dict[str, Any]:
        """The fields of an ``MCPServerTool`` row that discovery keeps up to date."""
        return {
            "description": self.description,
            "input_schema": self.input_schema,
            "title": self.title,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
        }


def _tool_infos(listed: Any) -> list[ToolInfo]:
    """The tools a server listed, bounded; a tool whose name no model provider accepts is left out."""
    result = []
    for tool in listed.tools[:MAX_TOOLS]:
        if not TOOL_NAME.fullmatch(tool.name):
            logger.warning("MCP tool name %r is not usable by models; it is left out", tool.name[:100])
            continue
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
            schema = {"type": "object"}
        output = tool.output_schema if isinstance(tool.output_schema, dict) else None
        if output is not None and len(json.dumps(output, default=str)) > MAX_SCHEMA_BYTES:
            output = None  # left out: clients then take the structured content as it comes
        hints = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
        if len(json.dumps(hints, default=str)) > MAX_SCHEMA_BYTES:
            hints = {}
        title = (tool.title or "")[:200]
        result.append(
            ToolInfo(tool.name, (tool.description or "")[:MAX_DESCRIPTION], schema, title, output, hints)
        )
    return result


async def _list_tools(session: ClientSession) -> list[ToolInfo]:
    tools: list[ToolInfo] = []
    cursor: str | None = None
    for _ in range(20):  # pages
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await asyncio.wait_for(session.list_tools(params=params), DISCOVER_TIMEOUT)
        tools.extend(_tool_infos(listed))
        cursor = getattr(listed, "next_cursor", None)
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tools[:MAX_TOOLS]


def _unlisted(endpoint: Endpoint, exc: BaseException) -> MCPUnavailable:
    return MCPUnavailable(f"MCP server {endpoint.name!r} did not list its tools: {describe(exc)}")


def describe(exc: BaseException) -> str:
    """A short, secret-free reason for a failure (exception groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message or f"MCP error {exc.code}"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text[:300]


# --- connections -------------------------------------------------------------------------------------


@dataclass
class _Connection:
    endpoint: Endpoint
    session: ClientSession | None = None
    task: asyncio.Task[None] | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    failures: int = 0
    status: str = MCPServer.Status.UNKNOWN
    attempts: int = 0
    retry_at: float = 0.0  # monotonic time of the next reconnect attempt
    last_error: str = ""
    reconnecting: asyncio.Task[None] | None = None
    reporting: asyncio.Task[None] | None = None  # the report of a lost connection, being stored
    checking: asyncio.Task[None] | None = None  # the health check under way
    intentional: bool = False
    connected_at: float = 0.0
    checked_at: float = field(default_factory=time.monotonic)
    tools: list[ToolInfo] = field(default_factory=list)
    inflight: notices.InFlight = field(default_factory=notices.InFlight)

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()


class Manager:
    """The connections of one process (see the module docstring). Use :func:`manager`."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        self._db = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-db")
        self._connections: dict[tuple[str, str], _Connection] = {}
        self._pending: dict[tuple[str, str], asyncio.Future[None]] = {}  # a connect under way, per key
        self._thread = threading.Thread(target=self._run_loop, name="mcp-manager", daemon=True)
        self._thread.start()
        self._submit(self._health_loop())

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def run(self, coro: Awaitable[T], timeout: float) -> T:
        """Run ``coro`` on the manager's loop from a synchronous caller, waiting at most ``timeout``.

        The hand-over is one wake-up each way and nothing more: the loop is woken once to start the
        task, and the caller waits on a plain lock that the task's end releases (no concurrent future,
        condition variable and chain of callbacks between the two threads)."""
        done = threading.Lock()
        done.acquire()
        started: list[asyncio.Task[T]] = []

        def finished(task: asyncio.Task[T]) -> None:
            if not task.cancelled():
                task.exception()  # retrieved here: a call given up on must not log "never retrieved"
            done.release()

        def start() -> None:
            task: asyncio.Task[T] = self._loop.create_task(coro)  # type: ignore[arg-type]
            started.append(task)
            task.add_done_callback(finished)

        self._loop.call_soon_threadsafe(start)
        if not done.acquire(timeout=timeout):
            self._loop.call_soon_threadsafe(lambda: [task.cancel() for task in started])
            raise MCPTimeout("timed out")
        [task] = started
        if task.cancelled():
            raise concurrent.futures.CancelledError()
        return task.result()

    async def _updated(self, conn: _Connection, uri: str) -> None:
        """A resource of the connection's server changed: tell its subscribers (``subscriptions``)."""
        endpoint = conn.endpoint
        try:
            groups = await self._db_call(
                subscriptions.groups_of, endpoint.tenant_id, endpoint.server_id, endpoint.user_id, uri[:2048]
            )
            await subscriptions.send(groups, uri[:2048])
        except Exception:
            logger.warning("MCP server %s: an update of %s was not passed on", endpoint.name, uri[:200])

    async def _db_call(self, function: Callable[..., T], *args: Any) -> T:
        def wrapped() -> T:
            close_old_connections()
            try:
                return function(*args)
            finally:
                close_old_connections()

        return await self._loop.run_in_executor(self._db, wrapped)

    # --- connecting

    async def _connect(self, conn: _Connection, deadline: float) -> None:
        """Open the session of ``conn`` in a task of its own (anyio's scopes must be left by the task
        that entered them); discovery runs on the new session."""
        endpoint = conn.endpoint
        attempts = STDIO_INIT_ATTEMPTS if endpoint.transport == MCPServer.Transport.STDIO else 1
        error: BaseException | None = None
        for attempt in range(1, attempts + 1):
            ready: asyncio.Future[ClientSession] = self._loop.create_future()
            conn.closing = asyncio.Event()
            conn.task = self._loop.create_task(self._hold(conn, ready))
            remaining = deadline - time.monotonic()
            try:
                conn.session = await asyncio.wait_for(asyncio.shield(ready), max(0.1, remaining))
                break
            except BaseException as exc:
                error = exc
                conn.closing.set()
                conn.task.cancel()
                with contextlib.suppress(BaseException):
                    await conn.task
                conn.session = None
                delay = 2.0**attempt
                if attempt == attempts or isinstance(exc, SSRFBlocked) or time.monotonic() + delay > deadline:
                    break
                await asyncio.sleep(delay)
        if conn.session is None:
            assert error is not None
            raise MCPUnavailable(f"could not connect to MCP server {endpoint.name!r}: {describe(error)}")
        conn.failures = 0
        conn.attempts = 0
        conn.connected_at = time.monotonic()
        try:
            conn.tools = await _list_tools(conn.session)
        except BaseException as exc:
            await self._drop(conn)
            raise MCPUnavailable(
                f"MCP server {endpoint.name!r} did not list its tools: {describe(exc)}"
            ) from None
        await self._report(conn, MCPServer.Status.CONNECTED, "")
        if not endpoint.user_id:
            await self._db_call(store_tools, endpoint, conn.tools)

    async def _hold(self, conn: _Connection, ready: asyncio.Future[ClientSession]) -> None:
        ended = asyncio.Event()
        try:
            async with _open(conn.endpoint, ended, conn.inflight, partial(self._updated, conn)) as session:
                if not ready.done():
                    ready.set_result(session)
                # Until the connection is closed on purpose, or the server's side ends (a stdio server's
                # process exited): then the finally below reports it lost at once.
                waits = [asyncio.ensure_future(conn.closing.wait()), asyncio.ensure_future(ended.wait())]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
                if ended.is_set() and not conn.intentional:
                    logger.warning("MCP server %s: the server ended the connection", conn.endpoint.name)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(MCPUnavailable(describe(exc)))
            elif not conn.intentional:
                logger.warning("MCP server %s: connection lost: %s", conn.endpoint.name, describe(exc))
        finally:
            if ready.done() and not conn.intentional and conn.session is not None:
                conn.session = None
                reason = "the connection closed"
                if ended.is_set():
                    stdio = conn.endpoint.transport == MCPServer.Transport.STDIO
                    reason = "the server process exited" if stdio else "the server closed the connection"
                # Marked lost now, before any call can run: a call finds it reconnecting, not free to
                # open a connection that the report would then take for the dead one.
                if self._mark_lost(conn, reason):
                    conn.reporting = self._loop.create_task(
                        self._report(conn, MCPServer.Status.DISCONNECTED, reason)
                    )

    async def _drop(self, conn: _Connection) -> None:
        conn.intentional = True
        conn.closing.set()
        conn.session = None
        if conn.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(conn.task, 5)

    async def _lost(self, conn: _Connection, reason: str) -> None:
        """The connection died or failed its health checks: report it and reconnect in the background."""
        if self._mark_lost(conn, reason):
            await self._report(conn, MCPServer.Status.DISCONNECTED, reason)

    def _mark_lost(self, conn: _Connection, reason: str) -> bool:
        """Drop the dead session and start reconnecting (with backoff), in one step of the loop; False
        when ``conn`` was closed on purpose or replaced."""
        if self._connections.get(conn.endpoint.key) is not conn or conn.intentional:
            return False
        conn.last_error = reason
        if conn.session is not None:
            conn.session = None
            conn.closing.set()  # the holding task leaves the dead session's scopes
        if conn.reconnecting is None or conn.reconnecting.done():
            conn.reconnecting = self._loop.create_task(self._reconnect(conn))
        return True

    async def _reconnect(self, conn: _Connection) -> None:
        while self._connections.get(conn.endpoint.key) is conn and not conn.intentional:
            conn.attempts += 1
            if conn.attempts > MAX_RECONNECT_ATTEMPTS:
                conn.attempts = 0
                conn.retry_at = time.monotonic() + RECONNECT_COOLDOWN
                await asyncio.sleep(RECONNECT_COOLDOWN)
                continue
            delay = backoff(conn.attempts)
            conn.retry_at = time.monotonic() + delay
            await asyncio.sleep(delay)
            if conn.alive:  # a call reconnected meanwhile
                return
            if not await self._db_call(_still_enabled, conn.endpoint):
                await self._forget(conn)
                return
            try:
                async with self._exclusive(conn.endpoint, time.monotonic() + CONNECT_TIMEOUT):
                    if conn.alive:
                        return
                    await self._connect(conn, time.monotonic() + CONNECT_TIMEOUT)
                    return
            except MCPUnavailable as exc:
                conn.last_error = str(exc)
                await self._report(conn, MCPServer.Status.ERROR, str(exc))

    async def _forget(self, conn: _Connection) -> None:
        if self._connections.get(conn.endpoint.key) is conn:
            del self._connections[conn.endpoint.key]
        await self._drop(conn)

    @contextlib.asynccontextmanager
    async def _exclusive(self, endpoint: Endpoint, deadline: float) -> Any:
        """One connect at a time per key: others wait for it (shielded, so giving up early never
        disturbs it) until their own deadline."""
        key = endpoint.key
        while (pending := self._pending.get(key)) is not None:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(asyncio.shield(pending), remaining)
            except TimeoutError:
                raise MCPUnavailable(f"MCP server {endpoint.name!r} is still being connected to.") from None
        done: asyncio.Future[None] = self._loop.create_future()
        self._pending[key] = done
        try:
            yield
        finally:
            del self._pending[key]
            done.set_result(None)

    async def session(self, endpoint: Endpoint, deadline: float) -> tuple[_Connection, ClientSession]:
        """The open session for ``endpoint``: reused when it is alive and configured the same; a changed
        configuration closes the old one. A server that is being reconnected answers at once, and no
        call waits for another's connecting beyond its own deadline."""
        conn = self._connections.get(endpoint.key)
        if conn is not None and conn.endpoint.fingerprint == endpoint.fingerprint:
            if conn.alive and conn.session is not None:
                conn.endpoint = endpoint  # same connection settings; the timeout may have changed
                return conn, conn.session
            if conn.reconnecting is not None and not conn.reconnecting.done():
                await self._reported(conn)
                raise self._reconnecting(conn)
        async with self._exclusive(endpoint, deadline):
            conn = self._connections.get(endpoint.key)
            if conn is not None and conn.endpoint.fingerprint != endpoint.fingerprint:
                await self._forget(conn)
                conn = None
            if conn is not None and conn.alive and conn.session is not None:
                conn.endpoint = endpoint  # same connection settings; the timeout may have changed
                return conn, conn.session
            if conn is not None and conn.reconnecting is not None and not conn.reconnecting.done():
                await self._reported(conn)
                raise self._reconnecting(conn)
            if conn is None:
                conn = self._connections[endpoint.key] = _Connection(endpoint=endpoint)
            conn.intentional = False
            try:
                await self._connect(conn, deadline)
            except MCPUnavailable as exc:
                # Later calls answer at once while the background attempts (with backoff) go on.
                conn.last_error = str(exc)
                await self._report(conn, MCPServer.Status.ERROR, str(exc))
                if conn.reconnecting is None or conn.reconnecting.done():
                    conn.reconnecting = self._loop.create_task(self._reconnect(conn))
                raise
            assert conn.session is not None
            return conn, conn.session

    @staticmethod
    async def _reported(conn: _Connection) -> None:
        """Wait (briefly) for the report of a lost connection to be stored: whoever is told the server
        is disconnected finds its status saying so."""
        if conn.reporting is not None and not conn.reporting.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(conn.reporting), 5)

    @staticmethod
    def _reconnecting(conn: _Connection) -> MCPUnavailable:
        wait = max(0.0, conn.retry_at - time.monotonic())
        return MCPUnavailable(
            f"MCP server {conn.endpoint.name!r} is disconnected ({conn.last_error}); "
            f"reconnecting, next attempt in {wait:.0f}s."
        )

    # --- calls

    async def call(
        self, endpoint: Endpoint, tool: str, args: dict[str, Any], listener: notices.Listener | None = None
    ) -> Any:
        """``tools/call`` on the reused session, within the server's timeout (connecting included);
        ``listener`` hears the call's progress and log messages (``notices``)."""

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if listener is not None:
                listener.on_progress(progress, total, message)

        wants_progress = listener is not None and listener.progress is not None

        async def send(session: ClientSession, remaining: float) -> Any:
            if not is_modern(session):
                return await session.call_tool(
                    tool,
                    args,
                    read_timeout_seconds=remaining,
                    progress_callback=progress if wants_progress else None,
                )
            return await _modern_call(
                session, tool, args, remaining, progress if wants_progress else None, listener
            )

        return await self.request(endpoint, send, "call", listener)

    async def request(
        self,
        endpoint: Endpoint,
        send: Callable[[ClientSession, float], Awaitable[T]],
        what: str = "request",
        listener: notices.Listener | None = None,
    ) -> T:
        """``send(session, seconds left)`` on the reused session (``resources/read``, ``prompts/get`` …),
        within the server's timeout (connecting included); a lost connection is reported and reconnected
        like a tool call's. ``what`` names the request in errors; ``listener`` hears the server's log
        messages meanwhile, when they can only be this request's (``notices.InFlight``)."""
        deadline = time.monotonic() + endpoint.timeout
        conn, session = await self.session(endpoint, min(deadline, time.monotonic() + CONNECT_TIMEOUT))
        remaining = max(0.1, deadline - time.monotonic())
        try:
            with conn.inflight.during(listener):
                return await asyncio.wait_for(send(session, remaining), remaining + 1)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise MCPTimeout(f"timed out after {endpoint.timeout:g}s") from None
            if exc.code == CONNECTION_CLOSED:
                await self._lost(conn, "the connection closed during a call")
                raise MCPUnavailable(
                    f"MCP server {endpoint.name!r} closed the connection during the {what}; it is being "
                    "reconnected."
                ) from None
            raise
        except TimeoutError:
            raise MCPTimeout(f"timed out after {endpoint.timeout:g}s") from None
        except Exception as exc:
            if not conn.alive:
                await self._lost(conn, describe(exc))
                raise MCPUnavailable(
                    f"MCP server {endpoint.name!r} is unreachable: {describe(exc)}"
                ) from None
            raise

    async def refresh(self, endpoint: Endpoint) -> list[ToolInfo]:
        """List the server's tools now on the shared connection, and store them."""
        deadline = time.monotonic() + CONNECT_TIMEOUT
        conn, session = await self.session(endpoint, deadline)
        if time.monotonic() - conn.connected_at < 1.0:
            return conn.tools  # just connected: discovery ran
        try:
            conn.tools = await _list_tools(session)
        except BaseException as exc:
            raise MCPUnavailable(
                f"MCP server {endpoint.name!r} did not list its tools: {describe(exc)}"
            ) from None
        await self._db_call(store_tools, endpoint, conn.tools)
        return conn.tools

    async def close(self, server_id: str) -> None:
        for key, conn in list(self._connections.items()):
            if key[0] == server_id:
                await self._forget(conn)

    async def close_all(self) -> None:
        for conn in list(self._connections.values()):
            await self._forget(conn)

    def connection_states(self) -> dict[tuple[str, str], dict[str, Any]]:
        """What this process holds (for diagnostics and tests)."""
        return {
            key: {"status": c.status, "alive": c.alive, "failures": c.failures, "attempts": c.attempts}
            for key, c in self._connections.items()
        }

    # --- health

    async def _health_loop(self) -> None:
        while True:
            interval = health_interval()
            await asyncio.sleep(min(1.0, interval))  # short naps: a changed interval applies at once
            now = time.monotonic()
            for conn in list(self._connections.values()):
                if now - conn.checked_at < interval or (
                    conn.checking is not None and not conn.checking.done()
                ):
                    continue
                conn.checked_at = now
                # Each connection is checked in a task of its own: a hung server's ping (up to
                # PING_TIMEOUT) never delays the checks of the others.
                conn.checking = self._loop.create_task(self._health(conn))

    async def _health(self, conn: _Connection) -> None:
        with contextlib.suppress(Exception):
            if not await self._db_call(_still_enabled, conn.endpoint):
                await self._forget(conn)  # disabled or deleted: its process is not kept
            elif conn.alive and conn.session is not None:
                await self._check(conn)

    async def _check(self, conn: _Connection) -> None:
        assert conn.session is not None
        started = time.perf_counter()
        try:
            session = conn.session
            if is_modern(session):  # ping is gone in 2026-07-28; discover is as cheap
                await asyncio.wait_for(session.send_discover(session.protocol_version or ""), PING_TIMEOUT)
            else:
                await asyncio.wait_for(session.send_ping(), PING_TIMEOUT)
            healthy, error = True, ""
        except MCPError as exc:
            healthy, error = exc.code == METHOD_NOT_FOUND, describe(exc)
            if exc.code == CONNECTION_CLOSED:
                await self._lost(conn, "the connection closed")
                return
        except BaseException as exc:
            healthy, error = False, describe(exc)
        if healthy:
            conn.failures = 0
            await self._report(conn, MCPServer.Status.CONNECTED, "", latency=time.perf_counter() - started)
            return
        conn.failures += 1
        if conn.failures >= HEALTH_FAIL_THRESHOLD or not conn.alive:
            await self._lost(conn, f"health check failed {conn.failures} times: {error}")

    async def _report(self, conn: _Connection, status: str, error: str, latency: float | None = None) -> None:
        changed = status != conn.status
        conn.status = status
        if conn.endpoint.user_id:
            return  # a user's own connection: its errors reach that user's calls, not the server's status
        health = {
            "status": status,
            "checked_at": timezone.now().isoformat(),
            "error": error[:500],
            "latency_ms": round(latency * 1000, 2) if latency is not None else None,
            "attempt": conn.attempts,
            "tools": len(conn.tools),
        }
        await self._db_call(record_status, conn.endpoint, status, health, changed)


# --- database side (run in the manager's database thread, or by callers) -------------------------------


def _still_enabled(endpoint: Endpoint) -> bool:
    # A suspended tenant's servers count as disabled: every process drops their connections (and stops
    # their processes) at its next health check.
    return MCPServer.objects.filter(
        pk=endpoint.server_id, tenant_id=endpoint.tenant_id, enabled=True, tenant__status=Tenant.Status.ACTIVE
    ).exists()


def record_status(endpoint: Endpoint, status: str, health: dict[str, Any], publish: bool) -> None:
    servers = MCPServer.objects.filter(pk=endpoint.server_id, tenant_id=endpoint.tenant_id)
    server = servers.select_related("tenant").first()
    if server is None:
        return
    publish = publish or server.status != status
    if server.tool_conflicts:  # the status says which discovered tools are not registered, and why
        health = {**health, "tool_conflicts": [c.get("reason", "") for c in server.tool_conflicts][:20]}
    servers.filter(pk=server.pk).update(status=status, last_health=health)
    if publish:
        events.publish(
            tenant=server.tenant,
            topic="mcp",
            type="mcp.server.status",
            data={"id": str(server.pk), "name": server.name, "status": status, "health": health},
        )


# A server page lists at most this many tools (``apps.dashboard.views.mcp.MAX_TOOLS``); the live event
# carries as many rows, each bounded, so that the page can show them without a reload.
EVENT_TOOL_ROWS = 1000
EVENT_DESCRIPTION_CHARS = 500
EVENT_SCHEMA_CHARS = 4000


def tool_rows(server: MCPServer, tools: list[ToolInfo]) -> list[dict[str, str]]:
    """The rows of a server page's tool list, as the live event carries them: name, registered name,
    description and input schema (as indented JSON text, left out when too long for an event)."""
    rows = []
    for info in tools[:EVENT_TOOL_ROWS]:
        stored = info.stored()
        schema = json.dumps(stored.get("input_schema") or {}, indent=2, sort_keys=True)
        rows.append(
            {
                "name": info.name,
                "registered": naming.registered_name(server, info.name),
                "description": str(stored.get("description") or "")[:EVENT_DESCRIPTION_CHARS],
                "schema": schema if len(schema) <= EVENT_SCHEMA_CHARS else "",
            }
        )
    return rows


def store_tools(endpoint: Endpoint, tools: list[ToolInfo]) -> bool:
    """Make the server's stored tools those discovered; True (and ``config_changed``) when they changed.
    A tool whose registered name is taken (``collisions``) is left out, and the server's
    ``tool_conflicts`` (shown with its status) say which and why; the others are stored."""
    with transaction.atomic():
        server = (
            MCPServer.objects.select_for_update()
            .filter(pk=endpoint.server_id, tenant_id=endpoint.tenant_id)
            .select_related("tenant")
            .first()
        )
        if server is None:
            return False
        rows = {t.name: t for t in MCPServerTool.objects.for_tenant(server.tenant).filter(server=server)}
        wanted = {t.name: t for t in tools}
        refused = collisions.conflicts(server.tenant, server, wanted)
        for name in refused:
            del wanted[name]
        conflicts = [{"tool": name, "reason": refused[name]} for name in sorted(refused)]
        changed = False
        if conflicts != (server.tool_conflicts or []):
            health = {k: v for k, v in (server.last_health or {}).items() if k != "tool_conflicts"}
            if conflicts:
                health["tool_conflicts"] = [c["reason"] for c in conflicts][:20]
            MCPServer.objects.for_tenant(server.tenant).filter(pk=server.pk).update(
                tool_conflicts=conflicts, last_health=health
            )
            changed = True
        for name, row in rows.items():
            if name not in wanted:
                row.delete()
                changed = True
        for name, info in wanted.items():
            existing = rows.get(name)
            fields = info.stored()
            if existing is None:
                MCPServerTool.objects.create(tenant=server.tenant, server=server, name=name, **fields)
                changed = True
            elif any(getattr(existing, key) != value for key, value in fields.items()):
                for key, value in fields.items():
                    setattr(existing, key, value)
                existing.discovered_at = timezone.now()
                existing.save(update_fields=[*fields, "discovered_at", "updated_at"])
                changed = True
        if changed:
            config_changed(server.tenant)
            events.publish(
                tenant=server.tenant,
                topic="mcp",
                type="mcp.server.tools",
                data={
                    "id": str(server.pk),
                    "name": server.name,
                    "tools": sorted(wanted),
                    "tool_rows": tool_rows(server, [wanted[name] for name in sorted(wanted)]),
                    "tool_conflicts": conflicts,
                },
            )
    return changed


# --- the process's manager ----------------------------------------------------------------------------

_manager: Manager | None = None
_manager_lock = threading.Lock()


def manager() -> Manager:
    """This process's manager (a fresh one after a fork: connections never cross processes)."""
    global _manager
    current = _manager
    if current is not None and current.pid == os.getpid():
        return current
    with _manager_lock:
        if _manager is None or _manager.pid != os.getpid():
            _manager = Manager()
        return _manager


def credential_for(server: MCPServer, user_id: str) -> UserCredential | None:
    from apps.mcp_grants.reachability import SYNTHETIC_USERS

    if user_id in SYNTHETIC_USERS:
        return None
    return UserCredential.objects.filter(tenant_id=server.tenant_id, server=server, user_id=user_id).first()


def refresh(server: MCPServer) -> list[ToolInfo]:
    """Discover the server's tools now over this process's shared connection and store them."""
    endpoint = endpoint_for(server)
    mgr = manager()
    return mgr.run(mgr.refresh(endpoint), CONNECT_TIMEOUT + DISCOVER_TIMEOUT + 5)


@dataclass
class Probe:
    ok: bool
    tools: list[ToolInfo]
    error: str
    duration_ms: float


def probe(server: MCPServer, *, store: bool = False) -> Probe:
    """Connect once with a fresh session (not the shared one), list the tools and close: what "test
    connection" shows. With ``store`` the tools found are stored as discovery does."""
    endpoint = endpoint_for(server)
    started = time.perf_counter()

    async def run() -> list[ToolInfo]:
        async with _open(endpoint) as session:
            return await _list_tools(session)

    mgr = manager()
    try:
        tools = mgr.run(asyncio.wait_for(run(), CONNECT_TIMEOUT), CONNECT_TIMEOUT + 5)
    except BaseException as exc:
        error = describe(exc)
        if store:
            health = {"status": MCPServer.Status.ERROR, "checked_at": timezone.now().isoformat()}
            record_status(endpoint, MCPServer.Status.ERROR, {**health, "error": error}, False)
        return Probe(False, [], error, round((time.perf_counter() - started) * 1000, 1))
    duration = round((time.perf_counter() - started) * 1000, 1)
    if store:
        store_tools(endpoint, tools)
        health = {"status": MCPServer.Status.CONNECTED, "checked_at": timezone.now().isoformat()}
        record_status(endpoint, MCPServer.Status.CONNECTED, {**health, "latency_ms": duration}, False)
    return Probe(True, tools, "", duration)
