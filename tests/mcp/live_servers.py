"""Real MCP servers (tests/mcp/servers/demo.py, made with the SDK) for the tests: the stdio command to
register, and HTTP servers (SSE, streamable HTTP) started on 127.0.0.2, an address the SSRF guard's test
seam allows (127.0.0.1 stays blocked, as in production)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEMO = Path(__file__).resolve().parent / "servers" / "demo.py"
HOST = "127.0.0.2"
ALLOW_NETS = f"{HOST}/32"


def stdio_fields() -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(DEMO), "stdio"]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP test server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the MCP test server did not listen on {HOST}:{port} in {timeout}s")


@contextlib.contextmanager
def http_server(transport: str) -> Iterator[str]:
    """Start the demo server over ``sse`` or ``streamable-http``; yields its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(DEMO), transport, HOST, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_port(port, process)
        yield f"http://{HOST}:{port}/{'sse' if transport == 'sse' else 'mcp'}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
