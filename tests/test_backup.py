"""`manage.py backup` and `manage.py restore` on the test run's embedded PostgreSQL server: real pg_dump and
pg_restore round trips. Restores go into databases of their own (the test database stays as it is)."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from urllib.parse import quote

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.db.utils import load_backend
from psycopg import sql

from apps.llm import services as llm_services
from apps.llm.models import Provider
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from config import backups
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-original-provider-secret"


def _drop(name: str) -> None:
    with backups.configured_server(name).maintenance() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _databases(prefix: str) -> set[str]:
    with backups.configured_server().maintenance() as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",))
        return {str(row[0]) for row in rows.fetchall()}


@pytest.fixture
def other_db() -> Iterator[str]:
    """The name of a database to restore into, dropped afterwards (with any scratch database left)."""
    name = f"{connection.settings_dict['NAME']}_restored"
    yield name
    while _opened:
        alias = _opened.pop()
        connections[alias].close()
        del connections[alias]
    for leftover in _databases(name):
        _drop(leftover)


_opened: list[str] = []


def _alias(name: str) -> str:
    """A Django connection to database ``name`` on the test server, for ``.using()``."""
    alias = f"restored_{name}"
    if alias not in _opened:
        conf = {**connection.settings_dict, "NAME": name, "OPTIONS": {}}
        connections[alias] = load_backend(conf["ENGINE"]).DatabaseWrapper(conf, alias)
        _opened.append(alias)
    return alias


def _close(alias: str) -> None:
    connections[alias].close()


def _tenant_with_secret() -> tuple[Tenant, Provider]:
    tenant = factories.make_tenant("backed-up")
    provider = llm_services.provider_create(
        actor=Actor.system(tenant), name="main", base_url="https://api.example.com/v1", api_key=SECRET
    )
    return tenant, provider


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_round_trip_restores_rows_and_secrets_that_still_decrypt(tmp_path: Path, other_db: str) -> None:
    tenant, provider = _tenant_with_secret()
    path = tmp_path / "toolgate.backup"

    made = _run("backup", str(path))
    assert "Wrote" in made
    assert "KiB" in made
    assert "NOT in the backup" in made
    assert backups.key_location() in made
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (tmp_path / "toolgate.backup.key").exists()
    contents = path.read_bytes()
    assert settings.FIELD_ENCRYPTION_KEY.encode() not in contents  # the key is not in the backup
    assert SECRET.encode() not in contents  # nor the secret in clear
    assert [p.name for p in tmp_path.iterdir()] == ["toolgate.backup"]  # no temporary file left

    # The backed-up database changes afterwards; the backup does not.
    Provider.objects.for_tenant(tenant).delete()
    Tenant.objects.filter(pk=tenant.pk).update(name="Renamed")

    first = _run("restore", str(path), "--yes", "--database-name", other_db)
    assert f'into "{other_db}" (created; no migration needed)' in first

    # The restored copy is changed too, then replaced by a second restore over it, while connected.
    alias = _alias(other_db)
    Provider.objects.for_tenant(tenant).using(alias).delete()
    Tenant.objects.using(alias).filter(pk=tenant.pk).update(name="Changed")
    assert not Provider.objects.for_tenant(tenant).using(alias).exists()

    second = _run("restore", str(path), "--yes", "--database-name", other_db)
    assert f'into "{other_db}" (replaced; no migration needed)' in second
    _close(alias)

    assert Tenant.objects.using(alias).get(pk=tenant.pk).name == "Test tenant"
    restored = Provider.objects.for_tenant(tenant).using(alias).get(pk=provider.pk)
    assert restored.api_key == SECRET  # decrypted through the model with the current key
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT api_key FROM llm_provider WHERE id = %s", [provider.pk])
        stored = cursor.fetchone()[0]
    assert stored != SECRET
    assert SECRET not in stored
    _close(alias)
    assert _databases(other_db) == {other_db}  # no scratch or replaced database left behind


def test_restore_refuses_without_yes_and_changes_nothing(tmp_path: Path, other_db: str) -> None:
    path = tmp_path / "toolgate.backup"
    _run("backup", str(path))
    with pytest.raises(CommandError, match=r"replaces the whole database .* --yes"):
        _run("restore", str(path), "--database-name", other_db)
    assert _databases(other_db) == set()


def test_backup_refuses_to_overwrite_a_file_without_force(tmp_path: Path) -> None:
    path = tmp_path / "toolgate.backup"
    path.write_text("precious")
    with pytest.raises(CommandError, match="already exists; pass --force"):
        _run("backup", str(path))
    assert path.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["toolgate.backup"]

    _run("backup", str(path), "--force")
    with backups.opened_backup(path) as (_, manifest):
        assert manifest["database"] == connection.settings_dict["NAME"]


def test_restore_refuses_a_backup_made_with_another_key_unless_given_that_key(
    tmp_path: Path, other_db: str
) -> None:
    tenant, provider = _tenant_with_secret()
    path = tmp_path / "toolgate.backup"
    made = _run("backup", str(path), "--include-key")
    key_path = tmp_path / "toolgate.backup.key"
    assert f"written to {key_path} (mode 0600)" in made
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert key_path.read_text().strip() == settings.FIELD_ENCRYPTION_KEY
    with backups.opened_backup(path) as (_, manifest):
        assert manifest["key_fingerprints"] == [backups.fingerprint(settings.FIELD_ENCRYPTION_KEY)]
        assert settings.FIELD_ENCRYPTION_KEY not in str(manifest)

    original_key = settings.FIELD_ENCRYPTION_KEY
    wrong = tmp_path / "wrong.key"
    wrong.write_text(Fernet.generate_key().decode() + "\n")
    try:
        settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()  # this Toolgate now has another key
        with pytest.raises(CommandError, match=r"not this Toolgate's field encryption key.*--key-file"):
            _run("restore", str(path), "--yes", "--database-name", other_db)
        with pytest.raises(CommandError, match=re.escape(f"the key in {wrong} is not that key")):
            _run("restore", str(path), "--yes", "--database-name", other_db, "--key-file", str(wrong))
        assert _databases(other_db) == set()

        done = _run("restore", str(path), "--yes", "--database-name", other_db, "--key-file", str(key_path))
    finally:
        settings.FIELD_ENCRYPTION_KEY = original_key
    assert f'into "{other_db}" (created' in done
    assert f"need the key in {key_path}" in done
    assert "FIELD_ENCRYPTION_KEY" in done
    alias = _alias(other_db)
    # With that key installed (the process's crypter holds it), the secrets decrypt.
    assert Provider.objects.for_tenant(tenant).using(alias).get(pk=provider.pk).api_key == SECRET
    _close(alias)


def test_a_restore_that_fails_leaves_the_target_as_it_was(tmp_path: Path, other_db: str) -> None:
    """A backup whose migrations cannot be applied (the record of one is missing, its table is not) fails
    loudly, and the database it was to replace keeps its data."""
    tenant, _ = _tenant_with_secret()
    good = tmp_path / "good.backup"
    _run("backup", str(good))
    _run("restore", str(good), "--yes", "--database-name", other_db)
    broken_db = f"{other_db}_broken"
    try:
        _run("restore", str(good), "--yes", "--database-name", broken_db)
        alias = _alias(broken_db)
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "DELETE FROM django_migrations WHERE app = 'tenants' AND name = '0008_setting_secret'"
            )
        _close(alias)
        broken = tmp_path / "broken.backup"
        _run("backup", str(broken), "--database-name", broken_db)
    finally:
        _drop(broken_db)

    target = _alias(other_db)
    Tenant.objects.using(target).filter(pk=tenant.pk).update(name="Kept")
    _close(target)
    with pytest.raises(CommandError, match=rf"(?s)migrate failed.*{other_db} was left as it was"):
        _run("restore", str(broken), "--yes", "--database-name", other_db)
    assert Tenant.objects.using(target).get(pk=tenant.pk).name == "Kept"
    _close(target)
    assert _databases(other_db) == {other_db}


def test_restore_refuses_what_is_not_a_backup(tmp_path: Path, other_db: str) -> None:
    path = tmp_path / "not-a-backup"
    path.write_bytes(os.urandom(2048))
    with pytest.raises(CommandError, match="is not a Toolgate backup"):
        _run("restore", str(path), "--yes", "--database-name", other_db)
    with tarfile.open(path, "w") as tar:  # a tar, but with more than the two members of a backup
        for name in ("manifest.json", "database.dump", "extra"):
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(CommandError, match=r"must hold exactly manifest\.json and database\.dump"):
        _run("restore", str(path), "--yes", "--database-name", other_db)
    with pytest.raises(CommandError, match="not a database name"):
        _run("restore", str(path), "--yes", "--database-name", "postgres")


def test_an_older_backup_is_migrated_before_it_is_swapped_in(tmp_path: Path, other_db: str) -> None:
    tenant, provider = _tenant_with_secret()
    current = tmp_path / "current.backup"
    _run("backup", str(current))
    older_db = f"{other_db}_older"
    try:  # a database as an older Toolgate left it: one migration not applied yet
        _run("restore", str(current), "--yes", "--database-name", older_db)
        alias = _alias(older_db)
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "DELETE FROM django_migrations WHERE app = 'accounts' AND name = '0001_expire_api_keys_task'"
            )
        _close(alias)
        older = tmp_path / "older.backup"
        _run("backup", str(older), "--database-name", older_db)
    finally:
        _drop(older_db)
    with backups.opened_backup(older) as (_, manifest):
        assert "accounts.0001_expire_api_keys_task" not in manifest["migrations"]

    done = _run("restore", str(older), "--yes", "--database-name", other_db)
    assert "Applying accounts.0001_expire_api_keys_task" in done
    assert f'into "{other_db}" (created; applied 1 migration(s) the backup lacked)' in done
    target = _alias(other_db)
    with connections[target].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'accounts'")
        assert cursor.fetchone()[0] == 1
    assert Provider.objects.for_tenant(tenant).using(target).get(pk=provider.pk).api_key == SECRET
    _close(target)


def test_database_url_server_round_trip_with_the_password_kept_off_the_command_line(
    tmp_path: Path, other_db: str
) -> None:
    """With DATABASE_URL (here the test server's socket, as an external server would be named), the
    commands run in processes of their own; the password goes to pg_dump and pg_restore in PGPASSWORD."""
    tenant, provider = _tenant_with_secret()
    conf = connection.settings_dict
    url = (
        f"postgres://{conf['USER']}:not-on-argv@{quote(conf['HOST'], safe='')}:{conf['PORT']}/{conf['NAME']}"
    )
    env = {**os.environ, "DATABASE_URL": url, "TOOLGATE_DB_NAME": str(conf["NAME"])}
    path = tmp_path / "external.backup"

    def manage(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    made = manage("backup", str(path))
    assert f'database "{conf["NAME"]}" on {conf["HOST"]}:{conf["PORT"]}' in made
    done = manage("restore", str(path), "--yes", "--database-name", other_db)
    assert f'into "{other_db}" (created; no migration needed)' in done
    target = _alias(other_db)
    assert Provider.objects.for_tenant(tenant).using(target).get(pk=provider.pk).api_key == SECRET
    _close(target)

    server = backups.configured_server()
    server = dataclasses.replace(server, password="s3cret-password")
    assert "s3cret-password" not in " ".join(server.program_args(server.name))
    assert server.program_env()["PGPASSWORD"] == "s3cret-password"
    assert "FIELD_ENCRYPTION_KEY" not in server.program_env()
