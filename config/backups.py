"""Backups of Toolgate's database (``manage.py backup`` and ``manage.py restore``).

A backup is one tar file holding two members:

- ``manifest.json``: what the backup is (Toolgate version, when it was made, the database's name and
  server version, the migrations applied, and fingerprints of the field encryption keys: hashes, never
  the keys);
- ``database.dump``: ``pg_dump --format=custom`` of the whole database (tenants, audit, every tool's
  data; the secret columns as the ciphertext django-encrypted-model-fields stored).

The field encryption key is not in it: without that key the secrets in a backup cannot be decrypted
(they would read back as ciphertext). ``--include-key`` writes it to a separate file beside the backup.

A restore never changes the target database in place: it restores into a fresh database on the same
server, migrates that one when the backup is older than the code, and only then swaps it in by renaming
(the old database is dropped). Whatever fails before the swap leaves the target as it was.

The programs run without a shell; the database password reaches them in ``PGPASSWORD``, never in argv.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from psycopg import sql

from config import embedded_db

FORMAT = "toolgate-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DUMP = "database.dump"
KEY_SUFFIX = ".key"
MAX_MANIFEST_BYTES = 1 << 20
MAX_KEY_FILE_BYTES = 64 << 10
KEY_FILE_NAME = "field_encryption_key"  # under the data directory (config/settings.py)
DATABASE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,62}$")
RESERVED_DATABASES = {"postgres", "template0", "template1"}
SWAP_ATTEMPTS = 50  # times 0.2 s, for the target's terminated connections to go away

Output = Callable[[str], None]


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


# --- The database server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """How to reach the configured PostgreSQL server, and which database of it."""

    host: str
    port: str
    user: str
    password: str = field(repr=False)
    name: str
    options: dict[str, str]

    def connect(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        params: dict[str, Any] = {
            "host": self.host or None,
            "port": self.port or None,
            "user": self.user or None,
            "password": self.password or None,
            "dbname": dbname or self.name,
            "connect_timeout": 10,
            **self.options,
        }
        return psycopg.connect(autocommit=True, **params)

    def maintenance(self) -> psycopg.Connection[Any]:
        """A connection to the server's maintenance database (to create, rename and drop databases)."""
        try:
            return self.connect("postgres")
        except psycopg.OperationalError:
            return self.connect("template1")

    def program_args(self, dbname: str) -> list[str]:
        args = ["--dbname", dbname]
        if self.host:
            args += ["--host", self.host]
        if self.port:
            args += ["--port", self.port]
        if self.user:
            args += ["--username", self.user]
        return [*args, "--no-password"]

    def program_env(self) -> dict[str, str]:
        """The environment of pg_dump and pg_restore: PG* variables (TLS files), the password, and the
        connection options; nothing else of this process's environment (which holds its secrets)."""
        env = {key: value for key, value in os.environ.items() if key.startswith("PG")}
        env.update({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"})
        for option, variable in (("sslmode", "PGSSLMODE"), ("sslrootcert", "PGSSLROOTCERT")):
            if option in self.options:
                env[variable] = self.options[option]
        if self.password:
            env["PGPASSWORD"] = self.password
        else:
            env.pop("PGPASSWORD", None)
        return env

    def describe(self) -> str:
        where = "the embedded server" if settings.EMBEDDED_DATABASE else f"{self.host or 'localhost'}"
        if not settings.EMBEDDED_DATABASE and self.port:
            where += f":{self.port}"
        return f'database "{self.name}" on {where}'


def configured_server(name: str | None = None) -> Server:
    """The server of Toolgate's database (the embedded one, or ``DATABASE_URL``'s); ``name`` picks
    another database on it."""
    conf = connections["default"].settings_dict
    options = {
        key: str(value)
        for key, value in (conf.get("OPTIONS") or {}).items()
        if key in {"sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"}
    }
    return Server(
        host=str(conf.get("HOST") or ""),
        port=str(conf.get("PORT") or ""),
        user=str(conf.get("USER") or ""),
        password=str(conf.get("PASSWORD") or ""),
        name=name or str(conf["NAME"]),
        options=options,
    )


def check_database_name(name: str) -> str:
    if not DATABASE_NAME.match(name) or name in RESERVED_DATABASES:
        raise BackupError(
            f"{name!r} is not a database name a restore may replace: use letters, digits, '_' and '-' "
            "(at most 63), and not postgres, template0 or template1."
        )
    return name


def _version_of(program: Path) -> int | None:
    try:  # Toolgate's own service process (an operator's command), not a tenant's: no jail
        result = subprocess.run(
            [str(program), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    match = re.search(r"\(PostgreSQL\) (\d+)", result.stdout)
    return int(match.group(1)) if match and result.returncode == 0 else None


def find_program(name: str, server_major: int) -> tuple[Path, int]:
    """``pg_dump`` or ``pg_restore`` for a server of version ``server_major``: the embedded wheel's,
    the one on PATH, or Debian's /usr/lib/postgresql/<version>/bin; the same major version first, else
    the oldest newer one (an older one cannot read a newer server)."""
    candidates: list[Path] = []
    with suppress(ImportError):
        candidates.append(embedded_db.bin_dir() / name)
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    candidates += sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    found: list[tuple[int, Path]] = []
    for candidate in candidates:
        major = _version_of(candidate) if candidate.is_file() else None
        if major is not None and major >= server_major:
            found.append((major, candidate))
    if not found:
        raise BackupError(
            f"No {name} for PostgreSQL {server_major} or newer was found (looked in the embedded server's "
            f"programs, PATH and /usr/lib/postgresql): install the PostgreSQL {server_major} client "
            f"programs (Debian: postgresql-client-{server_major})."
        )
    major, program = min(found, key=lambda item: (item[0] != server_major, item[0]))
    return program, major


def _run(program: Path, args: list[str], server: Server, out: Output, *, verbose: bool) -> None:
    """Run a PostgreSQL program (no shell); its stderr goes to ``out`` when verbose, and its last lines
    into the error when it fails."""
    command = [str(program), *args]
    if verbose:
        command.append("--verbose")
    tail: list[str] = []
    # Toolgate's own service process (pg_dump or pg_restore for an operator), not a tenant's: no jail.
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=server.program_env(),
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            line = line.rstrip()
            if verbose:
                out(f"  {line}")
            tail = [*tail[-19:], line]
    if process.returncode != 0:
        details = "\n".join(tail) or "(no output)"
        raise BackupError(f"{program.name} failed (exit status {process.returncode}):\n{details}")


# --- The field encryption key -------------------------------------------------------------------------


def configured_keys() -> list[str]:
    value = settings.FIELD_ENCRYPTION_KEY
    keys = [value] if isinstance(value, str) else list(value)
    return [str(key).strip() for key in keys if str(key).strip()]


def fingerprint(key: str) -> str:
    """A fingerprint of a field encryption key: a hash that tells keys apart and reveals nothing."""
    digest = hashlib.sha256(b"toolgate field encryption key\x00" + key.strip().encode()).hexdigest()
    return f"sha256:{digest[:32]}"


def key_location() -> str:
    if os.environ.get("FIELD_ENCRYPTION_KEY_FILE", "").strip():
        return f"the file {os.environ['FIELD_ENCRYPTION_KEY_FILE'].strip()} (FIELD_ENCRYPTION_KEY_FILE)"
    if os.environ.get("FIELD_ENCRYPTION_KEY", "").strip():
        return "the FIELD_ENCRYPTION_KEY environment variable"
    return f"the file {Path(settings.DATA_DIR) / KEY_FILE_NAME}"


def read_key_file(path: Path) -> list[str]:
    try:
        if path.stat().st_size > MAX_KEY_FILE_BYTES:
            raise BackupError(f"{path} is not a key file (larger than {MAX_KEY_FILE_BYTES} bytes).")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BackupError(f"Cannot read the key file {path}: {exc}") from None
    keys = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not keys:
        raise BackupError(f"The key file {path} holds no key.")
    return keys


# --- Migrations and the manifest ----------------------------------------------------------------------


def _applied(server: Server) -> list[tuple[str, str]]:
    with server.connect() as conn:
        rows = conn.execute("SELECT app, name FROM django_migrations ORDER BY app, name").fetchall()
    return [(str(app), str(name)) for app, name in rows]


def _code_migrations() -> set[tuple[str, str]]:
    return set(MigrationLoader(None, ignore_no_migrations=True).graph.nodes)


def _heads(applied: set[tuple[str, str]]) -> dict[str, list[str]]:
    """Per app, the applied migrations no applied migration depends on."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    heads: dict[str, list[str]] = {}
    for node in sorted(applied):
        graph_node = graph.node_map.get(node)
        children = graph_node.children if graph_node is not None else set()
        if not any(child.key in applied for child in children):
            heads.setdefault(node[0], []).append(node[1])
    return heads


def toolgate_version() -> str:
    try:
        with open(Path(settings.BASE_DIR) / "pyproject.toml", "rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"  # pragma: no cover


# --- Writing files ------------------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(temp: Path, path: Path, *, force: bool) -> None:
    """Give the complete file ``temp`` its name ``path`` (same directory) in one step; without
    ``force``, never over an existing file (a link, unlike a rename, fails on one that appeared since
    it was checked)."""
    if force:
        os.replace(temp, path)
    else:
        try:
            os.link(temp, path)
        except FileExistsError:
            raise BackupError(f"{path} already exists; pass --force to replace it.") from None
        temp.unlink()
    _fsync_dir(path.parent)


def _write_private(path: Path, data: bytes, *, force: bool) -> None:
    """Write ``path`` (mode 0600) through a temporary file, then publish it."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _publish(temp, path, force=force)
    finally:
        temp.unlink(missing_ok=True)


def _private_member(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mode, info.uid, info.gid, info.uname, info.gname = 0o600, 0, 0, "", ""
    return info


# --- Backup -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackupResult:
    path: Path
    size: int
    manifest: dict[str, Any]
    key_path: Path | None


def backup(
    path: Path,
    *,
    database_name: str | None = None,
    force: bool = False,
    include_key: bool = False,
    out: Output,
    verbose: bool = False,
) -> BackupResult:
    path = Path(path).expanduser().absolute()
    key_path = path.with_name(path.name + KEY_SUFFIX) if include_key else None
    if not path.parent.is_dir():
        raise BackupError(f"{path.parent} is not a directory.")
    for target in (path, key_path):
        if target is not None and target.exists() and not force:
            raise BackupError(f"{target} already exists; pass --force to replace it.")
    if path.is_dir():
        raise BackupError(f"{path} is a directory; give the backup file's path.")

    server = configured_server(database_name)
    try:
        with server.connect() as conn:
            server_version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            server_major = int(conn.info.server_version) // 10000
    except psycopg.Error as exc:
        raise BackupError(f"Cannot connect to {server.describe()}: {exc}") from None
    try:
        applied = _applied(server)
    except psycopg.Error as exc:
        raise BackupError(f"{server.describe()} is not a Toolgate database (no migrations: {exc}).") from None
    pg_dump, dump_major = find_program("pg_dump", server_major)
    out(f"Backing up {server.describe()} (PostgreSQL {server_version}) with {pg_dump} ({dump_major})…")

    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "toolgate_version": toolgate_version(),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "database": server.name,
        "server_version": server_version,
        "pg_dump_major": dump_major,
        "key_fingerprints": [fingerprint(key) for key in configured_keys()],
        "migrations": [f"{app}.{name}" for app, name in applied],
        "migration_heads": _heads(set(applied)),
    }
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as work:
        dump = Path(work) / DUMP
        _run(
            pg_dump,
            ["--format=custom", "--file", str(dump), *server.program_args(server.name)],
            server,
            out,
            verbose=verbose,
        )
        out(f"  dumped {human_size(dump.stat().st_size)}; writing {path}…")
        archive = Path(work) / "backup.tar"
        with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
            body = json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime = len(body), int(time.time())
            tar.addfile(_private_member(info), BytesIO(body))
            tar.add(dump, arcname=DUMP, recursive=False, filter=_private_member)
        os.chmod(archive, 0o600)
        with open(archive, "rb") as handle:
            os.fsync(handle.fileno())
        _publish(archive, path, force=force)
    if key_path is not None:
        _write_private(key_path, ("\n".join(configured_keys()) + "\n").encode(), force=force)
    return BackupResult(path=path, size=path.stat().st_size, manifest=manifest, key_path=key_path)


# --- Restore ------------------------------------------------------------------------------------------


def read_manifest(archive: tarfile.TarFile, path: Path) -> dict[str, Any]:
    entries: list[tarfile.TarInfo] = []
    while len(entries) <= 2 and (entry := archive.next()) is not None:  # two members, no more read
        entries.append(entry)
    names = {entry.name: entry for entry in entries}
    member = names.get(MANIFEST)
    if (
        len(entries) != 2
        or set(names) != {MANIFEST, DUMP}
        or member is None
        or not all(entry.isfile() for entry in entries)
    ):
        raise BackupError(f"{path} is not a Toolgate backup (it must hold exactly {MANIFEST} and {DUMP}).")
    if member.size > MAX_MANIFEST_BYTES:
        raise BackupError(f"{path}: its manifest is larger than {MAX_MANIFEST_BYTES} bytes.")
    handle = archive.extractfile(member)
    assert handle is not None
    try:
        manifest = json.loads(handle.read(MAX_MANIFEST_BYTES + 1))
    except ValueError as exc:
        raise BackupError(f"{path}: its manifest is not valid JSON ({exc}).") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{path} is not a Toolgate backup (its manifest is not one).")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BackupError(
            f"{path} is a backup of format {manifest.get('format_version')!r}; this Toolgate reads format "
            f"{FORMAT_VERSION}. Restore it with the Toolgate version that made it "
            f"({manifest.get('toolgate_version', 'unknown')})."
        )
    for key, kind in (("key_fingerprints", list), ("migrations", list), ("created_at", str)):
        if not isinstance(manifest.get(key), kind):
            raise BackupError(f"{path}: its manifest lacks {key!r}.")
    return manifest


@contextmanager
def opened_backup(path: Path) -> Iterator[tuple[tarfile.TarFile, dict[str, Any]]]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise BackupError(f"{path} does not exist or is not a file.")
    try:
        archive = tarfile.open(path, "r:")  # noqa: SIM115 (closed by the with below)
    except (OSError, tarfile.TarError) as exc:
        raise BackupError(f"{path} is not a Toolgate backup ({exc}).") from None
    with archive:
        yield archive, read_manifest(archive, path)


def check_key(manifest: dict[str, Any], key_file: Path | None) -> str | None:
    """Refuse a backup whose secrets the current key cannot decrypt; with ``key_file`` holding its key,
    return what the operator must do to install that key."""
    wanted = {str(value) for value in manifest["key_fingerprints"]}
    current = {fingerprint(key) for key in configured_keys()}
    if wanted <= current:
        return None
    made = f"The backup's secrets were encrypted with the key of fingerprint {', '.join(sorted(wanted))}"
    if key_file is None:
        raise BackupError(
            f"{made}, which is not this Toolgate's field encryption key ({', '.join(sorted(current))}, "
            f"from {key_location()}). Restored as is, those secrets could not be decrypted. Pass the "
            "backup's key with --key-file (the file `backup --include-key` wrote, or your copy of it)."
        )
    given = {fingerprint(key) for key in read_key_file(key_file)}
    if not wanted <= given:
        raise BackupError(f"{made}; the key in {key_file} is not that key ({', '.join(sorted(given))}).")
    return (
        f"The backup's secrets need the key in {key_file}, which is not the one Toolgate uses now. Install "
        f"it before starting Toolgate: set FIELD_ENCRYPTION_KEY to its contents, or (without that "
        f"variable) copy it to {Path(settings.DATA_DIR) / KEY_FILE_NAME} with mode 0600."
    )


def pending_migrations(manifest: dict[str, Any]) -> list[str]:
    """The code's migrations the backup lacks; refuses a backup made by a newer Toolgate."""
    code = {f"{app}.{name}" for app, name in _code_migrations()}
    backed_up = {str(name) for name in manifest["migrations"]}
    unknown = sorted(backed_up - code)
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise BackupError(
            f"The backup was made by a newer Toolgate ({manifest.get('toolgate_version', 'unknown')}): its "
            f"database has migrations this code does not know ({shown}). Upgrade Toolgate, then restore."
        )
    return sorted(code - backed_up)


def _exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def _scratch_name(target: str, purpose: str) -> str:
    return f"{target[:40]}_{purpose}_{secrets.token_hex(4)}"


def _drop(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _migrate(database: str, out: Output) -> None:
    """``manage.py migrate`` on ``database`` in a process of its own (its post-migrate steps, like the
    recurring jobs, then apply to that database and no other)."""
    env = {**os.environ, "TOOLGATE_DB_NAME": database}
    # Toolgate's own service process (its migrate, for an operator), not a tenant's: no jail.
    result = subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "migrate", "--noinput"],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        raise BackupError(f"migrate failed on the restored database:\n{tail}")
    for line in result.stdout.splitlines():
        if line.strip().startswith("Applying"):
            out(f"  {line.strip()}")


def _swap(conn: psycopg.Connection[Any], scratch: str, target: str, out: Output) -> bool:
    """Rename ``scratch`` to ``target``, replacing (and dropping) ``target`` if it exists. Returns whether
    a database was replaced."""
    ident = sql.Identifier
    if not _exists(conn, target):
        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(ident(scratch), ident(target)))
        return False
    old = _scratch_name(target, "old")
    conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(ident(target)))
    try:
        for attempt in range(SWAP_ATTEMPTS):
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                "AND pid <> pg_backend_pid()",
                (target,),
            )
            try:
                conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(ident(target), ident(old)))
                break
            except psycopg.errors.ObjectInUse:
                if attempt == SWAP_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)
    except BaseException:
        conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(ident(target)))
        raise
    try:
        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(ident(scratch), ident(target)))
    except BaseException:
        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(ident(old), ident(target)))
        conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(ident(target)))
        raise
    out(f"  swapped the restored database in; dropping the replaced one ({old})…")
    try:
        _drop(conn, old)
    except psycopg.Error as exc:
        out(f"  WARNING: could not drop the replaced database {old} ({exc}); drop it by hand.")
    return True


@dataclass(frozen=True)
class RestoreResult:
    database: str
    manifest: dict[str, Any]
    migrated: list[str]
    replaced: bool
    key_note: str | None


def restore(
    path: Path,
    *,
    database_name: str | None = None,
    key_file: Path | None = None,
    out: Output,
    verbose: bool = False,
) -> RestoreResult:
    path = Path(path).expanduser()
    server = configured_server(database_name)
    target = check_database_name(server.name)
    with opened_backup(path) as (archive, manifest):
        key_note = check_key(manifest, key_file)
        pending = pending_migrations(manifest)
        try:
            conn = server.maintenance()
        except psycopg.Error as exc:
            raise BackupError(
                f"Cannot connect to the database server of {server.describe()}: {exc}"
            ) from None
        with conn:
            server_major = int(conn.info.server_version) // 10000
            pg_restore, restore_major = find_program("pg_restore", server_major)
            if restore_major < int(manifest.get("pg_dump_major") or 0):
                raise BackupError(
                    f"The backup was written by pg_dump {manifest['pg_dump_major']}; {pg_restore} is "
                    f"{restore_major}, which cannot read it. Install the PostgreSQL "
                    f"{manifest['pg_dump_major']} client programs."
                )
            scratch = _scratch_name(target, "restore")
            out(
                f"Restoring {path} (made {manifest['created_at']} by Toolgate "
                f'{manifest.get("toolgate_version", "unknown")}, database "{manifest.get("database")}") '
                f"into a new database {scratch}…"
            )
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(scratch)))
            except psycopg.Error as exc:
                raise BackupError(
                    f"Cannot create the database to restore into ({exc}). A restore needs a user allowed to "
                    f"create databases (CREATEDB) and to own {target}; nothing was changed."
                ) from None
            try:
                with tempfile.TemporaryDirectory(prefix="toolgate-restore-") as work:
                    dump = Path(work) / DUMP
                    source = archive.extractfile(archive.getmember(DUMP))
                    assert source is not None
                    with source, open(dump, "wb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
                    _run(
                        pg_restore,
                        ["--exit-on-error", "--no-owner", *server.program_args(scratch), str(dump)],
                        server,
                        out,
                        verbose=verbose,
                    )
                if pending:
                    out(f"  the backup is older than this code: applying {len(pending)} migration(s)…")
                    _migrate(scratch, out)
                connections.close_all()
                replaced = _swap(conn, scratch, target, out)
            except BaseException as exc:
                _drop(conn, scratch)
                if isinstance(exc, psycopg.Error):
                    raise BackupError(f"Restore failed: {exc}. {target} was left as it was.") from None
                if isinstance(exc, BackupError):
                    raise BackupError(f"{exc}\nRestore failed; {target} was left as it was.") from None
                raise
    return RestoreResult(
        database=target, manifest=manifest, migrated=pending, replaced=replaced, key_note=key_note
    )
