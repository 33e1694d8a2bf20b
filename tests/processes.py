"""Real daphne and django-q2 processes for end-to-end tests, pointed at the test database."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
_STARTED: list[LiveProcesses] = []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveProcesses:
    def __init__(self, *, db_name: str, extra_env: Mapping[str, str] | None = None, label: str = "") -> None:
        """``extra_env`` is added to the children's environment (e.g. ``REDIS_URL``); ``label`` keeps
        the log files of several instances in one test run apart."""
        self.db_name = db_name
        self.extra_env = dict(extra_env or {})
        self.label = label
        self._daphne: subprocess.Popen[bytes] | None = None
        self._qcluster: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.logs: dict[str, Path] = {}
        _STARTED.append(self)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            TOOLGATE_DB_NAME=self.db_name,
            TOOLGATE_TEST="1",
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="WARNING",
        )
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"toolgate-test-{self.label}{name}-{os.getpid()}.log"
        self.logs[name] = log
        # The child keeps its own copy of the descriptor; ours is closed at once. Its database sessions
        # are named after it (the channel layer names its own after the process id).
        with log.open("wb") as handle:
            return subprocess.Popen(
                argv,
                cwd=BASE_DIR,
                env={**self.env(), "PGAPPNAME": self._session_name(name)},
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _session_name(self, name: str) -> str:
        """The database sessions' name of this instance's process ``name``."""
        return f"toolgate-test-{name}-{os.getpid()}-{id(self):x}"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/events/"

    def daphne(self, *, same_port: bool = False) -> str:
        """Start daphne once for the session; return its base URL. ``same_port`` starts a killed one
        again where its clients reconnect."""
        if self._daphne is None or self._daphne.poll() is not None:
            self.port = self.port if same_port and self.port else free_port()
            self._daphne = self._spawn(
                "daphne",
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "config.asgi:application",
                ],
            )
            deadline = time.monotonic() + 60
            while True:
                if self._daphne.poll() is not None:
                    raise RuntimeError(f"daphne exited: {self.logs['daphne'].read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as response:  # noqa: S310
                        if response.status == 200:
                            break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("daphne did not become healthy in 60s") from None
                    time.sleep(0.2)
        return self.base_url

    def kill_daphne(self) -> None:
        """Kill daphne outright (SIGKILL: no shutdown, its sockets dropped), as a crash would."""
        if self._daphne is not None and self._daphne.poll() is None:
            os.killpg(self._daphne.pid, signal.SIGKILL)
            self._daphne.wait()

    def qcluster(self) -> None:
        """Start a django-q2 cluster once for the session."""
        if self._qcluster is None or self._qcluster.poll() is not None:
            self._qcluster = self._spawn("qcluster", [sys.executable, "manage.py", "qcluster"])

    def stop_all(self) -> None:
        """Stop both processes, and wait (at most 10 s) until the database has ended their sessions: the
        test database cannot be dropped at the end of the run while a session of theirs is still there."""
        running = {
            name: process.pid
            for name, process in (("daphne", self._daphne), ("qcluster", self._qcluster))
            if process is not None and process.poll() is None
        }
        for process in (self._daphne, self._qcluster):
            _stop(process)
        if running:
            names = [self._session_name(name) for name in running]
            names += [f"toolgate-channels-{pid}" for pid in running.values()]
            names += [f"toolgate-channels-listener-{pid}-%" for pid in running.values()]
            _wait_for_sessions_to_end(self.db_name, names)

    def __enter__(self) -> LiveProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving a ``with`` block stops whatever the block started."""
        self.stop_all()

    def stop_qcluster(self) -> None:
        """Stop the cluster (the next :meth:`qcluster` starts a new one): for a test that needs its own
        cluster with another environment, which must be the only one taking jobs from the database."""
        _stop(self._qcluster)


def stop_every_cluster() -> None:
    """Stop the cluster of every instance made in this test process (their daphnes stay up)."""
    for processes in _STARTED:
        processes.stop_qcluster()


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_for_sessions_to_end(db_name: str, names: list[str]) -> None:
    """Wait (at most 10 s) until ``db_name`` holds no session whose name is like one of ``names``
    (sessions of processes that have exited: the server notices the closed connections a moment later)."""
    from django.db import connection

    from bench.db import admin_connection

    with admin_connection(connection.settings_dict) as admin:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name LIKE ANY(%s)",
                [db_name, names],
            ).fetchone()
            if row is None or row[0] == 0:
                return
            time.sleep(0.1)


def wait_until(check: Any, timeout: float = 60.0) -> Any:
    """Poll ``check`` until it gives something true (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout:g}s")
