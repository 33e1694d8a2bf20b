"""HAProxy in front of local web processes, with the frontend rules of the deployed load balancer that
matter to tenants (the quota gate of ``deploy/images/haproxy/haproxy.cfg``, read from that file so that
what is measured and tested is what is deployed). Used by the noisy-neighbour bench, the test topology
and the quota gate's tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.http_execute import free_port

DEPLOYED_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "images" / "haproxy" / "haproxy.cfg"
GATE_BEGIN = "# --- quota gate (begin) ---"
GATE_END = "# --- quota gate (end) ---"


def quota_gate_lines() -> list[str]:
    """The quota gate's lines of the deployed frontend (markers and comments included)."""
    lines = DEPLOYED_CONFIG.read_text().splitlines()
    stripped = [line.strip() for line in lines]
    try:
        begin, end = stripped.index(GATE_BEGIN), stripped.index(GATE_END)
    except ValueError:
        raise RuntimeError(
            f"{DEPLOYED_CONFIG} has no quota gate between {GATE_BEGIN!r} and {GATE_END!r}"
        ) from None
    return lines[begin : end + 1]


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise RuntimeError(
            "HAProxy is needed (Debian: apt-get install haproxy; make system-deps installs it)"
        )
    return found


def config_text(port: int, backends: Sequence[str]) -> str:
    """A frontend on 127.0.0.1:``port`` with the deployed quota gate, round robin over ``backends``
    (``host:port``)."""
    return "\n".join(
        [
            "global",
            "    maxconn 4000",
            "defaults",
            "    mode http",
            "    timeout connect 2s",
            "    timeout client 180s",
            "    timeout server 180s",
            "    timeout tunnel 1h",
            "frontend toolgate",
            f"    bind 127.0.0.1:{port}",
            *quota_gate_lines(),
            "    default_backend web",
            "backend web",
            "    balance roundrobin",
            *(f"    server web{n} {address}" for n, address in enumerate(backends, start=1)),
            "",
        ]
    )


@contextmanager
def load_balancer(backends: Sequence[str]) -> Iterator[str]:
    """HAProxy over ``backends`` for the block; yields its base URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="toolgate-lb-") as root:
        config = Path(root) / "haproxy.cfg"
        config.write_text(config_text(port, backends))
        checked = subprocess.run(
            [haproxy_binary(), "-c", "-q", "-f", str(config)], capture_output=True, text=True, check=False
        )
        if checked.returncode != 0:
            raise RuntimeError(
                f"the load balancer's configuration is invalid: {checked.stderr or checked.stdout}"
            )
        process = subprocess.Popen(
            [haproxy_binary(), "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                if process.poll() is not None:
                    raise RuntimeError("HAProxy exited during start-up")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("HAProxy did not listen within 20 s") from None
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
