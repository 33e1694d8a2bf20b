"""A complete export of one tenant, written before it is deleted (``delete_tenant --export PATH``).

The export is a new directory holding:

- ``rows.json``: every row of every tenant-owned table, as PostgreSQL renders it (``row_to_json``), read in
  one repeatable-read snapshot; encrypted fields stay ciphertext, and ``encryption`` says which columns
  they are and which key reads them (its fingerprint, never the key);
- ``workspaces.tar.gz``: the tenant's workspace tree (symlinks stored as links, never followed);
- ``manifest.json``: row counts per table, file sizes and SHA-256 digests, to check the export later.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone
from psycopg import sql

from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Membership, Tenant
from apps.tenants.platform_admin import is_secret
from apps.toolkit.workspace import workspace_root

FORMAT = "toolgate-tenant-export/1"


@dataclass
class Export:
    path: Path
    rows: dict[str, int] = field(default_factory=dict)
    workspace_files: int = 0
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def tenant_models() -> list[type[models.Model]]:
    """Every model whose rows belong to one tenant (a ``tenant`` foreign key), in a stable order."""
    owned = [
        m
        for m in apps.get_models()
        if any(
            f.name == "tenant" and f.is_relation and f.related_model is Tenant
            for f in m._meta.concrete_fields
        )
    ]
    return sorted(owned, key=lambda m: m._meta.db_table)


def tenant_workspace(tenant: Tenant) -> Path:
    return workspace_root() / "tenants" / str(tenant.pk)


def key_fingerprint() -> str:
    return hashlib.sha256(str(settings.FIELD_ENCRYPTION_KEY).encode()).hexdigest()[:16]


def check_export_path(path: Path) -> None:
    """Refuse a target that exists and is not an empty directory (an export never mixes with other files)."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ServiceError(ErrorCode.INVALID, f"export: {path} exists and is not an empty directory.")


def _prepare(path: Path) -> Path:
    check_export_path(path)
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def export_tenant(*, tenant: Tenant, path: Path) -> Export:
    """Write the export of ``tenant`` into ``path`` (a new or empty directory); see the module's docstring."""
    done = Export(path=_prepare(path))
    _write_rows(tenant, done.path / "rows.json", done)
    done.workspace_files = _write_workspaces(tenant, done.path / "workspaces.tar.gz")
    for name in ("rows.json", "workspaces.tar.gz"):
        done.files[name] = _describe(done.path / name)
    manifest = {
        "format": FORMAT,
        "tenant": {"id": str(tenant.pk), "slug": tenant.slug},
        "exported_at": timezone.now().isoformat(),
        "rows": done.rows,
        "workspace_files": done.workspace_files,
        "files": done.files,
    }
    (done.path / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return done


def _describe(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _write_rows(tenant: Tenant, target: Path, done: Export) -> None:
    owned = tenant_models()
    encrypted = {
        m._meta.db_table: [f.column for f in m._meta.concrete_fields if is_secret(f)]
        for m in owned
        if any(is_secret(f) for f in m._meta.concrete_fields)
    }
    members = (
        Membership.objects.for_tenant(tenant)
        .select_related("user")
        .order_by("created_at")
        .values_list("user__email", "role")
    )
    snapshot = not connection.in_atomic_block
    with target.open("w", encoding="utf-8") as out, transaction.atomic():
        with connection.cursor() as cursor:
            if snapshot:  # one snapshot for every table: rows that reference each other stay consistent
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT row_to_json(t)::text FROM tenants_tenant t WHERE t.id = %s", [tenant.pk])
            tenant_row = cursor.fetchone()[0]
        head = {
            "format": FORMAT,
            "exported_at": timezone.now().isoformat(),
            "encryption": {
                "note": "Encrypted columns hold ciphertext made with the installation's FIELD_ENCRYPTION_KEY "
                "(django-encrypted-model-fields, Fernet); keep that key to read them.",
                "key_fingerprint_sha256_16": key_fingerprint(),
                "columns": encrypted,
            },
            "members": [{"email": email, "role": role} for email, role in members],
        }
        out.write(json.dumps(head)[:-1] + ', "tenant": ' + tenant_row + ', "tables": {')
        for index, model in enumerate(owned):
            table = model._meta.db_table
            out.write(("," if index else "") + "\n " + json.dumps(table) + ": [")
            count = 0
            query = sql.SQL(
                "SELECT row_to_json(t)::text FROM {} t WHERE t.tenant_id = %s ORDER BY t.created_at, t.id"
            )
            with connection.chunked_cursor() as cursor:
                cursor.execute(query.format(sql.Identifier(table)), [tenant.pk])
                while rows := cursor.fetchmany(500):
                    for (row,) in rows:
                        out.write(("," if count else "") + "\n  " + row)
                        count += 1
            out.write("]")
            done.rows[table] = count
        out.write("\n}}\n")
    target.chmod(0o600)


def _write_workspaces(tenant: Tenant, target: Path) -> int:
    source = tenant_workspace(tenant)
    files = 0
    with tarfile.open(target, "w:gz") as archive:
        if source.is_dir():
            for root, dirs, names in os.walk(source, followlinks=False):
                dirs.sort()
                for name in sorted([*dirs, *names]):
                    full = Path(root) / name
                    archive.add(
                        full, arcname=str(Path("workspaces") / full.relative_to(source)), recursive=False
                    )
                    files += 0 if full.is_dir() and not full.is_symlink() else 1
    target.chmod(0o600)
    return files
