"""Real MCP servers (tests/mcp/servers/demo.py, made with the SDK) for the tests: the stdio command to
register, and HTTP servers (SSE, streamable HTTP) started on 127.0.0.2, an address the SSRF guard's test
seam allows (127.0.0.1 stays blocked, as in production)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEMO = Path(__file__).resolve().parent / "servers" / "demo.py"
# The tools of the demo server, as discovery finds them.
DEMO_TOOLS = frozenset(
    {
        "add",
        "ask_name",
        "captioned",
        "chatty",
        "counter",
        "echo",
        "env",
        "env_length",
        "fail",
        "kinds",
        "options",
        "peer",
        "pid",
        "pixel",
        "probe",
        "sample",
        "sleep",
        "whoami",
    }
)
HOST = "127.0.0.2"
ALLOW_NETS = f"{HOST}/32"


def stdio_fields() -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(DEMO), "stdio"]}


def free_port() -> int:
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


def url(transport: str, port: int) -> str:
    return f"http://{HOST}:{port}/{'sse' if transport == 'sse' else 'mcp'}"


@contextlib.contextmanager
def http_server(transport: str, port: int = 0, script: Path = DEMO) -> Iterator[str]:
    """Start the demo server (or ``script``, taking the same arguments) over ``sse`` or
    ``streamable-http`` (on ``port``, or a free one); yields its URL."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), transport, HOST, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_port(port, process)
        yield url(transport, port)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _ancestors(pid: int) -> set[int]:
    found: set[int] = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def stdio_server_pids(script: Path = DEMO) -> list[int]:
    """The host pids of the stdio test servers running ``script`` that this test process started
    (directly or through a process it started, such as daphne); their pids inside their jails mean
    nothing on the host, so they are found by command line and ancestry."""
    me, pids = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        program = os.path.basename(argv[0].decode(errors="replace")) if argv else ""
        if (
            str(script).encode() in argv
            and program.startswith("python")
            and me in _ancestors(int(entry.name))
        ):
            pids.append(int(entry.name))
    return pids


def kill_stdio_servers(script: Path = DEMO) -> int:
    """SIGKILL the stdio test servers running ``script`` that this test process started (see
    :func:`stdio_server_pids`). Returns how many were killed."""
    killed = 0
    for pid in stdio_server_pids(script):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed
