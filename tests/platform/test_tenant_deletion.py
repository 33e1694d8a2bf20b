"""Deleting a tenant with ``delete_tenant``: the export holds its rows (secrets as ciphertext) and its
workspace files, and afterwards nothing of it is left in any table, the workspace root, the schedules or
the cache, while another tenant's data and calls are untouched."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection
from django_q.models import Schedule
from psycopg import sql

from apps.accounts import services as accounts
from apps.llm import services as llm
from apps.policy import services as policy
from apps.runs import cron
from apps.tenants.actors import Actor
from apps.tenants.models import PlatformEvent, Tenant
from apps.tenants.roles import Role
from apps.toolkit.workspace import workspace_for, workspace_root
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def populate(tenant: Tenant) -> dict[str, Any]:
    """An agent with a workspace file, a policy, a provider with a secret, a schedule, a cache entry and a
    recorded tool call, all made the way the API makes them."""
    system = Actor.system(tenant)
    agent = accounts.agent_create(actor=system, key="bot", name=f"Bot of {tenant.slug}")
    workspace = workspace_for(tenant=tenant, agent=agent, user_id="")
    (workspace / "notes.txt").write_text(f"notes of {tenant.slug}\n")
    policy.policy_save(system, policy.target("tenant"), {"deny": ["web_fetch"]})
    llm.provider_create(
        actor=system, name="main", base_url="https://llm.example.test/v1", api_key=f"sk-{tenant.slug}-secret"
    )
    job = cron.job_create(actor=system, agent=agent, name="nightly", schedule="0 3 * * *", message="Report.")
    cache.set(f"mcp-search:{tenant.pk}:{agent.pk}:x", "kept", 600)
    raw = factories.make_api_key(tenant, Role.MEMBER)
    client = factories.key_client(raw)
    called = client.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "read_file", "args": {"path": "notes.txt"}},
        format="json",
    )
    assert called.status_code == 200, called.content
    assert f"notes of {tenant.slug}" in called.json()["for_llm"]
    return {"agent": agent, "workspace": workspace, "job": job, "client": client}


def tenant_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND column_name = 'tenant_id' ORDER BY table_name"
        )
        return [row[0] for row in cursor.fetchall()]


def rows_of(tenant_id: Any) -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in tenant_tables():
            query = sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s").format(sql.Identifier(table))
            cursor.execute(query, [tenant_id])
            if (n := cursor.fetchone()[0]) > 0:
                counts[table] = n
    return counts


def test_the_export_holds_the_tenant_and_afterwards_nothing_of_it_remains(tenant_a, tenant_b, tmp_path):
    a, b = populate(tenant_a), populate(tenant_b)
    a_id, a_schedule = tenant_a.pk, a["job"].q_schedule_id
    assert a_schedule is not None
    before_b = rows_of(tenant_b.pk)
    export = tmp_path / "export-a"
    out = io.StringIO()

    call_command("delete_tenant", "tenant-a", "--export", str(export), stdout=out)

    # The export: rows, secrets as ciphertext with the note, workspace files, a manifest that checks out.
    text = (export / "rows.json").read_text()
    dump = json.loads(text)
    assert dump["tenant"]["slug"] == "tenant-a"
    agents = dump["tables"]["tenants_agent"]
    assert [row["name"] for row in agents] == ["Bot of tenant-a"]
    assert dump["tables"]["policy_policydocument"][0]["document"]["deny"] == ["web_fetch"]
    assert len(dump["tables"]["audit_toolcall"]) == 1
    assert "sk-tenant-a-secret" not in text
    assert dump["tables"]["llm_provider"][0]["api_key"]  # the ciphertext
    assert "api_key" in dump["encryption"]["columns"]["llm_provider"]
    assert "FIELD_ENCRYPTION_KEY" in dump["encryption"]["note"]
    assert "tenant-b" not in text
    with tarfile.open(export / "workspaces.tar.gz") as archive:
        names = archive.getnames()
        notes = [n for n in names if n.endswith("/notes.txt")]
        assert len(notes) == 1
        member = archive.extractfile(notes[0])
        assert member is not None
        assert member.read() == b"notes of tenant-a\n"
    manifest = json.loads((export / "manifest.json").read_text())
    assert (
        manifest["files"]["rows.json"]["sha256"]
        == hashlib.sha256((export / "rows.json").read_bytes()).hexdigest()
    )
    assert manifest["rows"]["tenants_agent"] == 1

    # Nothing of tenant A remains: no row in any table with a tenant column, no tenant, no files, no
    # schedule, no cache entry.
    assert rows_of(a_id) == {}
    assert not Tenant.objects.filter(pk=a_id).exists()
    assert not (workspace_root() / "tenants" / str(a_id)).exists()
    assert not Schedule.objects.filter(pk=a_schedule).exists()
    assert cache.get(f"mcp-search:{a_id}:{a['agent'].pk}:x") is None
    event = PlatformEvent.objects.get(verb="tenant.deleted")
    assert (event.tenant_slug, event.data["export"]) == ("tenant-a", str(export))
    assert "Deleted tenant-a" in out.getvalue()

    # Tenant B is untouched, and its calls go on.
    assert rows_of(tenant_b.pk) == before_b
    assert (b["workspace"] / "notes.txt").read_text() == "notes of tenant-b\n"
    assert Schedule.objects.filter(pk=b["job"].q_schedule_id).exists()
    assert cache.get(f"mcp-search:{tenant_b.pk}:{b['agent'].pk}:x") == "kept"
    again = b["client"].post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "read_file", "args": {"path": "notes.txt"}},
        format="json",
    )
    assert again.status_code == 200
    assert "notes of tenant-b" in again.json()["for_llm"]


def test_the_command_refuses_without_an_export_or_a_confirmation_and_changes_nothing(tenant_a, tmp_path):
    factories.make_api_key(tenant_a, Role.OWNER)
    with pytest.raises(CommandError, match="Refusing to delete without an export"):
        call_command("delete_tenant", "tenant-a")
    with pytest.raises(CommandError, match="--no-export --yes"):
        call_command("delete_tenant", "tenant-a", "--no-export")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "other.txt").write_text("not ours")
    with pytest.raises(CommandError, match="is not an empty directory"):
        call_command("delete_tenant", "tenant-a", "--export", str(taken))
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    assert (taken / "other.txt").read_text() == "not ours"
    assert PlatformEvent.objects.count() == 0


def test_no_export_with_yes_deletes(tenant_a, tenant_b):
    populate(tenant_a)
    call_command("delete_tenant", "tenant-a", "--no-export", "--yes", stdout=io.StringIO())
    assert rows_of(tenant_a.pk) == {}
    assert Tenant.objects.filter(pk=tenant_b.pk).exists()
    assert PlatformEvent.objects.get(verb="tenant.deleted").data["export"] is None


def test_every_table_with_a_tenant_column_is_exported_and_deleted() -> None:
    from apps.runtime.tenant_export import tenant_models

    assert sorted(m._meta.db_table for m in tenant_models()) == tenant_tables()
