"""What a bridged server says while one of its tools runs: progress and log notifications and requests
for input, passed to whoever called the tool (``/mcp/<agent>/`` streams them to its client, README
"While a tool runs").

The caller sets a :class:`Listener` for the call (:func:`listening`, a context variable: it follows the
call into the pipeline's thread); the bridge hands it to the connection (``client.Manager.call``), which
passes on:

- **progress** of that very call: the connection asks the server for progress with a token of its own,
  so a notification is the call's beyond doubt;
- **log messages** (``notifications/message``) while the call runs, when it is the only request in
  flight on that connection. A log message names no request: with two in flight on one connection (one
  server, one tenant, one credential) it could be either's, and it goes to neither.

- **requests for input** (``sampling/createMessage``, ``elicitation/create``, or a 2026-07-28 server's
  ``InputRequiredResult``), under the same rule as log messages: relayed to the caller's client when
  the listener can ask one (:attr:`Listener.ask`), else answered as when there is no client: sampling
  refused (Toolgate runs no model), elicitation declined.

Everything passed on is scrubbed by the call's scrubber and bounded: :data:`MAX_NOTICES` per call,
:data:`MAX_NOTICE_CHARS` of text each. The listener's callbacks are called on the connection's event
loop; they must not block (the endpoint's hand the notice to its own loop).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

# RFC 5424 severities, as MCP names them, least severe first.
LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
MAX_NOTICES = 1000  # notifications passed on per call; the rest are dropped
MAX_NOTICE_CHARS = 16 * 1024  # text of one progress message or one log message's data (as JSON)


def at_least(level: str) -> frozenset[str]:
    """The levels as severe as ``level`` or more (every level for an unknown one)."""
    start = LEVELS.index(level) if level in LEVELS else 0
    return frozenset(LEVELS[start:])


@dataclass
class Listener:
    """Who hears one call's notifications. ``progress(progress, total, message)`` and
    ``log(level, data, logger)`` take values already scrubbed and bounded; ``levels`` are the log levels
    wanted (empty: none)."""

    progress: Callable[[float, float | None, str | None], None] | None = None
    log: Callable[[str, Any, str | None], None] | None = None
    # Asks the caller's client (``"sampling"`` or ``"elicitation"``, with the request's params, scrubbed);
    # awaited on the connection's loop. None: there is no client to ask.
    ask: Callable[[str, Any], Awaitable[Any]] | None = None
    levels: frozenset[str] = frozenset()
    scrub: Callable[[str], str] = str
    sent: int = 0
    # Finds ``levels`` when a bridged tool is about to run (it may read the database: called in the
    # calling thread by :func:`prepared`, never on the connection's loop), so calls of other tools
    # never pay for it.
    find_levels: Callable[[], frozenset[str]] | None = None

    def _room(self) -> bool:
        if self.sent >= MAX_NOTICES:
            return False
        self.sent += 1
        return True

    def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress is None or not self._room():
            return
        text = self.scrub(message[:MAX_NOTICE_CHARS]) if message else message
        self.progress(progress, total, text)

    async def on_ask(self, kind: str, params: Any) -> Any:
        assert self.ask is not None
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        scrubbed = type(params).model_validate(_walk(wire, self.scrub))
        return await self.ask(kind, scrubbed)

    def on_log(self, level: str, data: Any, logger: str | None) -> None:
        if self.log is None or level not in self.levels or not self._room():
            return
        self.log(level, _scrubbed(data, self.scrub), self.scrub(logger[:200]) if logger else logger)


def _scrubbed(data: Any, scrub: Callable[[str], str]) -> Any:
    """``data`` (any JSON value) with every string scrubbed; one over :data:`MAX_NOTICE_CHARS` as JSON
    becomes its scrubbed, truncated JSON text."""
    try:
        text = json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(data)
    if len(text) > MAX_NOTICE_CHARS:
        return scrub(text[:MAX_NOTICE_CHARS]) + " [truncated]"
    return _walk(data, scrub)


def _walk(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(k)): _walk(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, scrub) for v in value]
    return value


_current: contextvars.ContextVar[Listener | None] = contextvars.ContextVar("mcp_call_listener", default=None)


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    """Calls made within (in this context and the threads it is copied to) report to ``listener``."""
    token = _current.set(listener)
    try:
        yield listener
    finally:
        _current.reset(token)


def current() -> Listener | None:
    return _current.get()


def prepared(listener: Listener | None, scrub: Callable[[str], str]) -> Listener | None:
    """``listener`` ready for a bridged call: with the call's scrubber (the bridge knows it once the
    connection's secrets are registered) and its log levels found."""
    if listener is not None:
        listener.scrub = scrub
        if listener.find_levels is not None:
            listener.levels, listener.find_levels = listener.find_levels(), None
    return listener


@dataclass
class InFlight:
    """The requests in flight on one connection, and the listeners among them; its session's logging
    callback."""

    requests: int = 0
    listeners: list[Listener] = field(default_factory=list)

    @contextlib.contextmanager
    def during(self, listener: Listener | None) -> Iterator[None]:
        self.requests += 1
        if listener is not None:
            self.listeners.append(listener)
        try:
            yield
        finally:
            self.requests -= 1
            if listener is not None:
                self.listeners.remove(listener)

    def _sole(self) -> Listener | None:
        """The listener of the one request in flight; None when there are several (whose a message is
        cannot be told) or it has none."""
        return self.listeners[0] if self.requests == 1 and len(self.listeners) == 1 else None

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        listener = self._sole()
        if listener is not None:
            listener.on_log(str(params.level), params.data, params.logger)

    async def on_sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        """A server's ``sampling/createMessage``: relayed to the client of the call it came during, or
        refused when there is none to ask (Toolgate runs no model of its own)."""
        listener = self._sole()
        if listener is None or listener.ask is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=NO_CLIENT_SAMPLING)
        return await listener.on_ask("sampling", params)

    async def on_elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        """A server's ``elicitation/create``: relayed like sampling, or declined when there is no client
        to ask (nobody is there to answer it)."""
        listener = self._sole()
        if listener is None or listener.ask is None:
            return types.ElicitResult(action="decline")
        return await listener.on_ask("elicitation", params)


NO_CLIENT_SAMPLING = (
    "Sampling needs the MCP client of the call, and none can be asked here (a call not made through "
    "Toolgate's MCP endpoint, an endpoint request on protocol 2026-07-28, or several calls at once on "
    "this connection). Toolgate runs no model of its own."
)
