"""Real HTTP(S) servers on loopback addresses for the outbound-HTTP tests (no mocks of httpx).

Linux routes all of 127.0.0.0/8 to the loopback interface, so a test can run a "public" server on
127.0.0.2 (allowed through the SSRF guard's test seam, TOOLGATE_SSRF_ALLOW_NETS) next to an "internal"
one on 127.0.0.1 (never allowed), even on the same port. Each server records the requests it got, so a
test can prove a blocked request never reached it.
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Route = Callable[["Handler"], None]


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Handler(BaseHTTPRequestHandler):
    """Dispatches to the server's routes by path (without the query); unknown paths answer 404."""

    server: LocalServer._Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.owner.hits.append(
            Hit(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        route = self.server.owner.routes.get(urlsplit(self.path).path)
        try:
            if route is None:
                self.reply(404, b"not found")
            else:
                route(self)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client stopped reading (size cap, timeout): expected in these tests

    do_GET = do_POST = do_HEAD = _dispatch

    def reply(self, status: int, body: bytes = b"", content_type: str = "text/plain", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def redirect(self, location: str, status: int = 302) -> None:
        self.reply(status, b"", Location=location)


class LocalServer:
    """A threaded HTTP server on ``host`` (IPv4 or IPv6 literal) and a free (or given) port."""

    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        owner: LocalServer

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client dropping a kept-alive connection (or a capped download) is normal here.
            if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, TimeoutError)):
                super().handle_error(request, client_address)

    def __init__(
        self,
        host: str,
        port: int = 0,
        routes: dict[str, Route] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: list[Hit] = []
        server_class = type(
            "S", (self._Server,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET}
        )
        self._server = server_class((host, port), Handler)
        self._server.owner = self
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port: int = self._server.server_address[1]
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> LocalServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, path: str = "/", host: str | None = None) -> str:
        name = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"{self.scheme}://{name}:{self.port}{path}"

    def route(self, path: str) -> Callable[[Route], Route]:
        def register(function: Route) -> Route:
            self.routes[path] = function
            return function

        return register


@contextmanager
def serving(host: str, port: int = 0, tls: ssl.SSLContext | None = None) -> Iterator[LocalServer]:
    server = LocalServer(host, port, tls=tls).start()
    try:
        yield server
    finally:
        server.stop()
