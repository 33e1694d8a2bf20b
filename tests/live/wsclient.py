"""A small synchronous client of ``/ws/events/`` for live tests: every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from websockets.sync.client import ClientConnection, connect

OPEN_TIMEOUT = 10.0
RECV_TIMEOUT = 10.0
EVENT_TIMEOUT = 30.0

Message = dict[str, Any]


class EventSocket:
    """An open websocket; remembers every message it received, in order, in ``received``."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.received: list[Message] = []

    def send(self, message: Message | str | bytes) -> None:
        self.connection.send(message if isinstance(message, str | bytes) else json.dumps(message))

    def recv(self, timeout: float = RECV_TIMEOUT) -> Message:
        """The next message; raises ``TimeoutError`` after ``timeout`` seconds."""
        raw = self.connection.recv(timeout=timeout)
        message: Message = json.loads(raw)
        self.received.append(message)
        return message

    def request(self, message: Message | str | bytes, timeout: float = RECV_TIMEOUT) -> Message:
        """Send one message and return the next one received (the protocol answers in order)."""
        self.send(message)
        return self.recv(timeout)

    def subscribe(self, topics: list[str]) -> Message:
        reply = self.request({"type": "subscribe", "topics": topics})
        assert reply["type"] == "subscribed", reply
        return reply

    def wait_for(self, predicate: Callable[[Message], bool], timeout: float = EVENT_TIMEOUT) -> Message:
        """Read until a message matches ``predicate``; fail with what was received after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching message within {timeout:g}s; received: {self.received}")
            try:
                message = self.recv(timeout=remaining)
            except TimeoutError:
                continue
            if predicate(message):
                return message

    def events(self) -> list[Message]:
        """The events (not protocol replies) received so far."""
        return [m["event"] for m in self.received if m.get("type") == "event"]


@contextlib.contextmanager
def open_socket(
    url: str,
    *,
    api_key: str | None = None,
    cookie: str | None = None,
    origin: str | None = None,
) -> Iterator[EventSocket]:
    """Connect for the ``with`` block (the handshake raises ``InvalidStatus`` when refused)."""
    headers: dict[str, str] = {}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    if cookie is not None:
        headers["Cookie"] = cookie
    with connect(
        url,
        additional_headers=headers,
        origin=origin,  # type: ignore[arg-type]
        open_timeout=OPEN_TIMEOUT,
        close_timeout=5,
    ) as connection:
        yield EventSocket(connection)


def event_of(message: Message, *, topic: str, type: str, tenant: str | None = None, **data: Any) -> bool:
    """Whether ``message`` is an event of ``topic``/``type`` whose data has the given items."""
    if message.get("type") != "event":
        return False
    event = message["event"]
    if event["topic"] != topic or event["type"] != type:
        return False
    if tenant is not None and event["tenant"] != tenant:
        return False
    return all(event["data"].get(key) == value for key, value in data.items())
