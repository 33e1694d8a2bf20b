"""A throwaway ``redis-server`` for the tests: 127.0.0.1, a free port, no persistence, a temp directory.

``scripts/system-deps.sh`` (run by ``make test``) installs the Debian package; a missing binary fails
the run loudly instead of skipping anything. Every wait here is bounded.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.processes import free_port

REDIS_SERVER = "/usr/bin/redis-server"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
# Another process may take the free port between our probe and redis-server's bind: try again.
START_ATTEMPTS = 3


class RedisServer:
    """One ``redis-server`` child process; ``start()`` returns once it answers PING."""

    def __init__(self) -> None:
        self.port = 0
        self.dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``REDIS_URL`` of database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        assert self.dir is not None
        return self.dir / "redis.log"

    def client(self) -> redis.Redis:
        """A synchronous client of database 0 (close it after use)."""
        return redis.Redis(host="127.0.0.1", port=self.port, db=0, socket_timeout=5, socket_connect_timeout=5)

    def start(self) -> None:
        if not Path(REDIS_SERVER).is_file():
            raise RuntimeError(
                f"{REDIS_SERVER} is missing: run `bash scripts/system-deps.sh` (Debian package redis-server)"
            )
        self.dir = Path(tempfile.mkdtemp(prefix="toolgate-redis-"))
        last_error = ""
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            if self._spawn():
                return
            last_error = self.log.read_text(errors="replace")[-2000:]
            self._terminate()
        self.stop()
        raise RuntimeError(f"redis-server did not start in {START_ATTEMPTS} attempts: {last_error}")

    def pause(self) -> None:
        """Stop the server, keeping its port for :meth:`resume` (its clients lose their connections)."""
        self._terminate()

    def resume(self) -> None:
        """Start the server again on the same port, empty."""
        if not self._spawn():
            raise RuntimeError(
                f"redis-server did not restart: {self.log.read_text(errors='replace')[-2000:]}"
            )

    def _spawn(self) -> bool:
        assert self.dir is not None
        with self.log.open("ab") as handle:  # the child keeps its own copy of the descriptor
            self._process = subprocess.Popen(
                [
                    REDIS_SERVER,
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.dir),
                    "--daemonize",
                    "no",
                ],
                cwd=self.dir,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test run is handled by stop(), not the child
            )
        return self._wait_until_ready()

    def _wait_until_ready(self) -> bool:
        """PING until it answers (True) or the process exits or ``START_TIMEOUT`` passes (False)."""
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False  # typically "Address already in use"
            with contextlib.suppress(redis.RedisError), self.client() as client:
                if client.ping():
                    return True
            time.sleep(0.05)
        return False

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        self._terminate()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


@pytest.fixture(scope="session", name="redis_server")
def redis_server_fixture() -> Iterator[RedisServer]:
    """A ``redis-server`` for the whole test session (import this fixture into the module using it)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
