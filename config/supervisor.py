"""``make run``: prepare the database, seed the demo, and run the web workers (daphne processes) and a
django-q2 cluster in the foreground. Ctrl-C (or SIGTERM) stops everything: every child with its whole
process group, then the embedded PostgreSQL server when Toolgate runs on it.

The web workers listen on one address: the supervisor binds one socket per worker on it with
``SO_REUSEPORT`` and hands each daphne its own (``--fd``), so the kernel spreads new connections evenly
over the workers and nothing else balances. (With one shared socket, the worker that wakes first
accepts every connection waiting: sixteen keep-alive connections opened at once often all went to one
worker, and the other stayed idle.) Their number is ``TOOLGATE_WEB_WORKERS``, by default the machine's
cores. A worker that dies stops the whole set (the supervisor does not hide a crash by restarting it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
STOP_GRACE_SECONDS = 10.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=_env(), check=True)


def web_workers() -> int:
    """``TOOLGATE_WEB_WORKERS``, by default the cores this process may use (at least 1)."""
    raw = os.environ.get("TOOLGATE_WEB_WORKERS", "").strip()
    if not raw:
        return max(
            1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        )
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"TOOLGATE_WEB_WORKERS must be a whole number of processes, not {raw!r}") from None
    if not 1 <= value <= 64:
        raise SystemExit(f"TOOLGATE_WEB_WORKERS must be between 1 and 64, not {value}")
    return value


def _socket(host: str, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def listen(host: str, port: int, count: int = 1) -> list[socket.socket]:
    """``count`` listening sockets on ``host:port`` (port 0: a free one), one per web worker.

    With ``SO_REUSEPORT`` (Linux), each worker accepts on its own socket and the kernel hashes each new
    connection to one of them. The address is first bound without it, so an address already in use
    fails here (``OSError``) instead of silently sharing connections with another server of this user.
    Without ``SO_REUSEPORT`` the workers share one socket. The sockets are inheritable, for the children.
    """
    probe = _socket(host, reuse_port=False)
    try:
        probe.bind((host, port))
        port = probe.getsockname()[1]
    finally:
        probe.close()
    reuse_port = count > 1 and hasattr(socket, "SO_REUSEPORT")
    sockets: list[socket.socket] = []
    try:
        for _ in range(count if reuse_port else 1):
            sock = _socket(host, reuse_port=reuse_port)
            sockets.append(sock)
            sock.bind((host, port))
            sock.listen(1024)
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets if reuse_port else sockets * count


def _start(name: str, argv: list[str], pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes]:
    # Toolgate's own service processes (web workers, the django-q2 cluster), never a tenant's: they run
    # unjailed, and every process they start for a tenant goes through the jail (apps.toolkit.jail).
    # Own session: Ctrl-C reaches only the supervisor, which then stops each child's whole group.
    process = subprocess.Popen(argv, cwd=BASE_DIR, env=_env(), start_new_session=True, pass_fds=pass_fds)
    print(f"[toolgate] started {name} (pid {process.pid})", flush=True)
    return process


def _stop(children: dict[str, subprocess.Popen[bytes]]) -> None:
    # SIGTERM to each leader only: qcluster stops its own workers; stragglers are killed below.
    for process in children.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for name, process in children.items():
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"[toolgate] {name} did not stop in time; killing it", flush=True)
        # Kill whatever is left in the group (q2 worker processes, for instance).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own loopback URL)
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def main() -> int:
    os.chdir(BASE_DIR)
    host = os.environ.get("TOOLGATE_HOST", "127.0.0.1")
    port = os.environ.get("TOOLGATE_PORT", "8000")
    embedded = not (
        os.environ.get("DATABASE_URL", "").strip() or os.environ.get("DATABASE_URL_FILE", "").strip()
    )
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    children: dict[str, subprocess.Popen[bytes]] = {}
    code = 0
    started = time.monotonic()
    workers = web_workers()
    try:
        _manage("bootstrap")
        from config.metrics import prepare_multiprocess_dir

        prepare_multiprocess_dir()  # a fresh start of the counters, before any process writes them
        try:
            listeners = listen(host, int(port), workers)
        except OSError as exc:
            print(f"[toolgate] cannot listen on {host}:{port}: {exc.strerror}", flush=True)
            return 1
        try:
            for number, listener in enumerate(listeners, start=1):
                fd = listener.fileno()
                children[f"web-{number}"] = _start(
                    f"web worker {number} of {workers}",
                    [sys.executable, "-m", "daphne", "--fd", str(fd), "config.asgi:application"],
                    pass_fds=(fd,),
                )
        finally:
            # The children hold the sockets now; the supervisor's copies are closed (a worker that dies
            # takes its socket with it, and the kernel stops sending connections there).
            for listener in set(listeners):
                listener.close()
        children["qcluster"] = _start("qcluster", [sys.executable, "manage.py", "qcluster"])
        base = f"http://{host}:{port}"
        if not _wait_healthy(f"{base}/healthz", children["web-1"]):
            print("[toolgate] the web workers did not become healthy", flush=True)
            return 1
        print(
            f"[toolgate] ready in {time.monotonic() - started:.1f}s with {workers} web worker(s): "
            f"dashboard {base}/  API {base}/api/v1/  "
            f"docs {base}/api/docs/  websockets ws://{host}:{port}/ws/events/  (Ctrl-C stops everything)",
            flush=True,
        )
        while not stopping:
            for name, process in children.items():
                if process.poll() is not None:
                    print(f"[toolgate] {name} exited with code {process.returncode}; stopping", flush=True)
                    code = 1
                    stopping = True
            time.sleep(0.2)
    except subprocess.CalledProcessError as exc:
        print(f"[toolgate] setup step failed: {' '.join(map(str, exc.cmd))}", flush=True)
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("[toolgate] stopping…", flush=True)
        _stop(children)
        if embedded:
            sys.path.insert(0, str(BASE_DIR))
            from config import embedded_db

            if embedded_db.stop():
                print("[toolgate] embedded PostgreSQL stopped", flush=True)
        print("[toolgate] stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
