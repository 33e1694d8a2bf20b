"""``make run`` end to end: the real supervisor on a fresh data directory, cold and then warm.

The supervisor (``python -m config.supervisor``) runs exactly as ``make run`` runs it: it starts its own
embedded PostgreSQL under a throwaway ``TOOLGATE_DATA_DIR``, migrates, seeds the demo, and starts daphne
and a django-q2 cluster. The test then uses the credentials the supervisor printed, over real HTTP, and
checks that Ctrl-C (SIGINT) leaves nothing behind: no daphne/qcluster process and no PostgreSQL server.

It uses no Django database fixture on purpose: everything it checks goes through the processes it
started, never through the test session's own database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 120.0  # a cold start runs initdb + every migration; generous for slow CI machines
STOP_TIMEOUT = 60.0  # supervisor grace for children (10 s) + pg_ctl fast stop, with margin
HTTP_TIMEOUT = 15.0

READY_RE = re.compile(
    r"^\[toolgate\] ready in (?P<seconds>[0-9.]+)s with (?P<workers>\d+) web worker\(s\): "
    r"dashboard (?P<base>http://\S+)/ "
)
STARTED_RE = re.compile(
    r"^\[toolgate\] started (?P<name>web worker \d+ of \d+|qcluster) \(pid (?P<pid>\d+)\)$"
)
WEB_WORKERS = 2
LOGIN_RE = re.compile(r"^Dashboard login: (?P<email>\S+@\S+) / (?P<password>\S+)$")
NEW_KEY_RE = re.compile(r"^Demo API key \(admin, shown once, store it now\): (?P<key>tgk_\S+)$")
KNOWN_KEY_RE = re.compile(r"^Demo API key: +(?P<prefix>\S+?)… was shown when it was created")
CSRF_INPUT_RE = re.compile(r'name="csrfmiddlewaretoken" value="(?P<token>[^"]+)"')

pytestmark = pytest.mark.live


def _free_port() -> int:
    # Bind-then-release: another process could take the port in between, but on a test machine the
    # window is tiny and daphne would then fail loudly (the test reports the supervisor's output).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _supervisor_env(data_dir: Path, port: int) -> dict[str, str]:
    """The environment of a developer's ``make run``: embedded database, default settings."""
    env = dict(os.environ)
    # The test session's own database settings must not leak into the supervisor: it has to bring up
    # and own its own embedded server, with real password hashing, exactly as ``make run`` does.
    for name in ("DATABASE_URL", "TOOLGATE_DB_NAME", "TOOLGATE_TEST", "REDIS_URL", "TOOLGATE_HOST"):
        env.pop(name, None)
    env.update(
        TOOLGATE_DATA_DIR=str(data_dir),
        TOOLGATE_PORT=str(port),
        TOOLGATE_WEB_WORKERS=str(WEB_WORKERS),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return env


@dataclass
class Supervisor:
    """One running ``python -m config.supervisor`` whose combined output is read on a thread.

    The output must be drained continuously: daphne and qcluster inherit the supervisor's stdout, so an
    unread pipe would eventually block them.
    """

    process: subprocess.Popen[str]
    started_at: float
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @classmethod
    def start(cls, *, data_dir: Path, port: int) -> Supervisor:
        started_at = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "config.supervisor"],
            cwd=BASE_DIR,
            env=_supervisor_env(data_dir, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            # Own session: our SIGINT reaches only the supervisor, like Ctrl-C in its terminal would.
            start_new_session=True,
        )
        supervisor = cls(process=process, started_at=started_at)
        threading.Thread(target=supervisor._drain, daemon=True).start()
        return supervisor

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """Read output lines until one matches ``pattern``; fail after ``timeout`` seconds or at EOF."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no line matching {pattern.pattern!r} within {timeout:g}s:\n{self.output()}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"supervisor output ended before {pattern.pattern!r}:\n{self.output()}")
            self.lines.append(line)
            match = pattern.search(line)
            if match is not None:
                return match

    def stop(self, timeout: float) -> int:
        """Ctrl-C the supervisor and wait for it; returns its exit code."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=timeout)
        # Collect the rest of its output (the drain thread ends at EOF) for assertions and messages.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return code


@dataclass(frozen=True)
class Run:
    """What one start printed and how long it took to get ready."""

    base_url: str
    email: str
    password: str
    new_api_key: str | None
    known_key_prefix: str | None
    ready_seconds_measured: float  # by this test: process start to the "ready" line
    ready_seconds_reported: float  # as printed by the supervisor
    child_pids: dict[str, int]
    postmaster_pid: int


def _read_startup(supervisor: Supervisor) -> Run:
    """Parse the seed output, the children's pids and the ready line, in the order they appear."""
    login = supervisor.wait_for(LOGIN_RE, READY_TIMEOUT)
    key_line = supervisor.wait_for(re.compile(f"{NEW_KEY_RE.pattern}|{KNOWN_KEY_RE.pattern}"), 10)
    new_key = NEW_KEY_RE.search(key_line.string)
    known_key = KNOWN_KEY_RE.search(key_line.string)
    remaining = READY_TIMEOUT - (time.monotonic() - supervisor.started_at)
    child_pids: dict[str, int] = {}
    while len(child_pids) < WEB_WORKERS + 1:
        started = supervisor.wait_for(STARTED_RE, remaining)
        child_pids[started["name"]] = int(started["pid"])
    ready = supervisor.wait_for(READY_RE, READY_TIMEOUT - (time.monotonic() - supervisor.started_at))
    assert int(ready["workers"]) == WEB_WORKERS
    measured = time.monotonic() - supervisor.started_at
    return Run(
        base_url=ready["base"],
        email=login["email"],
        password=login["password"],
        new_api_key=new_key["key"] if new_key else None,
        known_key_prefix=known_key["prefix"] if known_key else None,
        ready_seconds_measured=measured,
        ready_seconds_reported=float(ready["seconds"]),
        child_pids=child_pids,
        postmaster_pid=0,
    )


def _postmaster_pid(pgdata: Path) -> int:
    # First line of postmaster.pid is the server's pid (PostgreSQL's documented file layout).
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _assert_serves_the_demo(run: Run, api_key: str) -> None:
    """Health, login page, a real dashboard login, and the demo API key, over HTTP."""
    with httpx.Client(base_url=run.base_url, timeout=HTTP_TIMEOUT) as client:
        health = client.get("/healthz")
        assert health.status_code == 200
        assert health.json() == {"status": "ok"}

        # The dashboard home is only for logged-in users: anonymous is sent to the login page.
        anonymous_home = client.get("/")
        assert anonymous_home.status_code == 302
        assert anonymous_home.headers["location"].startswith("/login/")

        login_page = client.get("/login/")
        assert login_page.status_code == 200
        assert "csrftoken" in client.cookies
        token = CSRF_INPUT_RE.search(login_page.text)
        assert token is not None, "the login form has no csrfmiddlewaretoken"

        logged_in = client.post(
            "/login/",
            data={"username": run.email, "password": run.password, "csrfmiddlewaretoken": token["token"]},
        )
        # A failed login re-renders the form with 200; success redirects to LOGIN_REDIRECT_URL.
        assert logged_in.status_code == 302, logged_in.text[:2000]
        assert logged_in.headers["location"] == "/"
        assert "sessionid" in client.cookies

        home = client.get("/")
        assert home.status_code == 200
        me = client.get("/api/v1/me/")
        assert me.status_code == 200
        assert me.json()["kind"] == "user"
        assert me.json()["email"] == run.email
        assert me.json()["tenant"]["slug"] == "demo"
        assert me.json()["role"] == "owner"

    with httpx.Client(base_url=run.base_url, timeout=HTTP_TIMEOUT) as client:
        by_key = client.get("/api/v1/me/", headers={"Authorization": f"Bearer {api_key}"})
        assert by_key.status_code == 200
        assert by_key.json()["kind"] == "api_key"
        assert by_key.json()["tenant"]["slug"] == "demo"
        assert by_key.json()["role"] == "admin"
        assert "sessionid" not in client.cookies


def _leftovers(*, pgids: set[int], pids: set[int], data_dir: Path, port: int) -> list[str]:
    """Live processes that belong to this run: in a child's process group, one of ``pids``, with the
    data dir in their command line (the postmaster's ``-D``), or listening as daphne on ``port``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue  # already dead; only its parent's wait() is missing
            cmdline: list[str] = proc.info["cmdline"] or []
            pgid = os.getpgid(proc.pid)
        except (psutil.Error, ProcessLookupError):
            continue  # it exited while we looked
        mentions_data_dir = any(str(data_dir) in arg for arg in cmdline)
        serves_port = port in _listening_ports(proc)
        if pgid in pgids or proc.pid in pids or mentions_data_dir or serves_port:
            found.append(f"pid {proc.pid} pgid {pgid}: {' '.join(cmdline)}")
    return found


def _listening_ports(proc: psutil.Process) -> set[int]:
    try:
        return {c.laddr.port for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
    except psutil.Error:
        return set()


def _web_worker_pids(run: Run) -> set[int]:
    return {pid for name, pid in run.child_pids.items() if name.startswith("web worker")}


def _assert_every_web_worker_serves(run: Run, port: int) -> None:
    """Each web worker accepts on its own socket of the port, and a burst of connections opened at once
    (as a load balancer or a load generator opens its keep-alive pool) is spread over all of them. On
    one shared socket, the first worker to wake accepted the whole burst."""
    workers = _web_worker_pids(run)
    assert len(workers) == WEB_WORKERS
    assert all(port in _listening_ports(psutil.Process(pid)) for pid in workers)

    def accepted() -> dict[int, int]:
        return {
            pid: sum(
                1
                for c in psutil.Process(pid).net_connections(kind="inet")
                if c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
            )
            for pid in workers
        }

    burst = 16
    with contextlib.ExitStack() as stack:
        for _ in range(burst):
            stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT))
        deadline = time.monotonic() + 10
        while sum((counts := accepted()).values()) < burst and time.monotonic() < deadline:
            time.sleep(0.05)
    assert sum(counts.values()) == burst, counts
    # Each worker gets a connection unless the kernel's hash sends all 16 to one (2 in 65,536 with 2).
    assert all(counts.values()), f"a burst of {burst} connections went to one worker only: {counts}"


def _assert_stopped_cleanly(supervisor: Supervisor, run: Run, *, data_dir: Path, port: int) -> None:
    code = supervisor.stop(timeout=STOP_TIMEOUT)
    assert code == 0, supervisor.output()
    assert "[toolgate] embedded PostgreSQL stopped" in supervisor.lines, supervisor.output()
    assert supervisor.lines[-1] == "[toolgate] stopped"

    pgdata = data_dir / "pg"
    assert not (pgdata / "postmaster.pid").exists()
    # Children were started in their own sessions, so each one's pgid is its pid.
    leftovers = _leftovers(
        pgids=set(run.child_pids.values()),
        pids={*run.child_pids.values(), run.postmaster_pid},
        data_dir=data_dir,
        port=port,
    )
    assert leftovers == [], "processes left behind:\n" + "\n".join(leftovers)


def _kill_everything(supervisor: Supervisor | None, run: Run | None, pgdata: Path) -> None:
    """Last-resort cleanup when an assertion failed midway; a no-op after a clean stop."""
    if supervisor is not None and supervisor.process.poll() is None:
        supervisor.process.send_signal(signal.SIGINT)
        try:
            supervisor.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(supervisor.process.pid, signal.SIGKILL)
            supervisor.process.wait(timeout=10)
    for pgid in run.child_pids.values() if run is not None else []:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    pidfile = pgdata / "postmaster.pid"
    if pidfile.exists():
        try:
            pid = _postmaster_pid(pgdata)
            os.kill(pid, signal.SIGINT)  # PostgreSQL's "fast shutdown"
            psutil.Process(pid).wait(timeout=30)
        except (ValueError, OSError, psutil.Error):
            pass


def test_make_run_cold_then_warm_start_serves_the_demo_and_stops_cleanly(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    timings: dict[str, tuple[float, float]] = {}

    # --- cold start: empty data dir, so initdb, every migration and the demo seed run.
    cold_port = _free_port()
    supervisor: Supervisor | None = None
    cold: Run | None = None
    try:
        supervisor = Supervisor.start(data_dir=data_dir, port=cold_port)
        cold = _read_startup(supervisor)
        cold = _with_postmaster(cold, data_dir)
        assert cold.base_url == f"http://127.0.0.1:{cold_port}"
        assert cold.email == "owner@demo.toolgate.local"
        assert cold.new_api_key is not None, "a cold start must print the new demo API key"
        assert cold.known_key_prefix is None
        _assert_serves_the_demo(cold, cold.new_api_key)
        _assert_every_web_worker_serves(cold, cold_port)
        _assert_stopped_cleanly(supervisor, cold, data_dir=data_dir, port=cold_port)
        timings["cold"] = (cold.ready_seconds_measured, cold.ready_seconds_reported)
    finally:
        _kill_everything(supervisor, cold, data_dir / "pg")
    assert cold is not None
    assert cold.new_api_key is not None
    api_key = cold.new_api_key

    # --- warm start: same data dir; the seed is idempotent, so no new key, same login.
    warm_port = _free_port()
    supervisor = None
    warm: Run | None = None
    try:
        supervisor = Supervisor.start(data_dir=data_dir, port=warm_port)
        warm = _read_startup(supervisor)
        warm = _with_postmaster(warm, data_dir)
        assert warm.new_api_key is None, "a warm start must not mint another demo API key"
        assert warm.known_key_prefix is not None
        assert api_key.startswith(f"tgk_{warm.known_key_prefix}_")
        assert (warm.email, warm.password) == (cold.email, cold.password)
        assert not any("shown once" in line for line in supervisor.lines)
        _assert_serves_the_demo(warm, api_key)
        _assert_stopped_cleanly(supervisor, warm, data_dir=data_dir, port=warm_port)
        timings["warm"] = (warm.ready_seconds_measured, warm.ready_seconds_reported)
    finally:
        _kill_everything(supervisor, warm, data_dir / "pg")

    # Printed on purpose (run with -s): docs/benchmarks.md records these figures.
    for name, (measured, reported) in timings.items():
        print(  # noqa: T201
            f"\nmake run {name} start: ready after {measured:.1f}s (supervisor reports {reported:.1f}s)"
        )


def _with_postmaster(run: Run, data_dir: Path) -> Run:
    """``run`` with the pid of the embedded PostgreSQL that serves it (running while we are ready)."""
    pid = _postmaster_pid(data_dir / "pg")
    assert psutil.pid_exists(pid)
    return dataclasses.replace(run, postmaster_pid=pid)
