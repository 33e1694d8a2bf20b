"""``make run``: prepare the database, seed the demo, and run daphne and a django-q2 cluster in the
foreground. Ctrl-C (or SIGTERM) stops everything: both children with their whole process groups, then
the embedded PostgreSQL server when Toolgate runs on it.
"""

from __future__ import annotations

import contextlib
import os
import signal
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


def _start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    # Own session: Ctrl-C reaches only the supervisor, which then stops each child's whole group.
    process = subprocess.Popen(argv, cwd=BASE_DIR, env=_env(), start_new_session=True)
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
    embedded = not os.environ.get("DATABASE_URL", "").strip()
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    children: dict[str, subprocess.Popen[bytes]] = {}
    code = 0
    started = time.monotonic()
    try:
        _manage("bootstrap")
        children["daphne"] = _start(
            "daphne", [sys.executable, "-m", "daphne", "-b", host, "-p", port, "config.asgi:application"]
        )
        children["qcluster"] = _start("qcluster", [sys.executable, "manage.py", "qcluster"])
        base = f"http://{host}:{port}"
        if not _wait_healthy(f"{base}/healthz", children["daphne"]):
            print("[toolgate] daphne did not become healthy", flush=True)
            return 1
        print(
            f"[toolgate] ready in {time.monotonic() - started:.1f}s: dashboard {base}/  API {base}/api/v1/  "
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
