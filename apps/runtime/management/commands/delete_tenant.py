from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.runtime.management.commands._tenant_command import command_actor, tenant_by_slug
from apps.runtime.tenant_lifecycle import tenant_delete
from apps.tenants.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Delete a tenant and everything of it (rows, workspaces, containers, schedules, cache keys), after "
        "writing a complete export to PATH (a new directory: rows.json, workspaces.tar.gz, manifest.json). "
        "Without an export it needs --no-export --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--export", metavar="PATH", help="a new or empty directory for the export")
        parser.add_argument("--no-export", action="store_true", help="delete without an export (needs --yes)")
        parser.add_argument("--yes", action="store_true", help="confirm deleting without an export")

    def handle(self, *args: Any, **options: Any) -> None:
        export, no_export = options["export"], options["no_export"]
        if export and no_export:
            raise CommandError("Give either --export PATH or --no-export, not both.")
        if not export and not no_export:
            raise CommandError(
                "Refusing to delete without an export: give --export PATH (or --no-export --yes to delete "
                "with no copy kept)."
            )
        if no_export and not options["yes"]:
            raise CommandError("Deleting without an export cannot be undone: confirm with --no-export --yes.")
        tenant = tenant_by_slug(options["slug"])
        self.stdout.write(f"Deleting tenant {tenant.slug}: suspending it, then exporting and removing it...")
        try:
            done = tenant_delete(
                tenant=tenant, by=command_actor("delete_tenant"), export_path=Path(export) if export else None
            )
        except ServiceError as exc:
            raise CommandError(f"{exc.message} Nothing was deleted.") from None
        except OSError as exc:
            raise CommandError(
                f"The export failed ({exc}). Nothing was deleted; the tenant stays suspended."
            ) from None
        if done.export is not None:
            self.stdout.write(
                f"Exported {done.export.total_rows} rows and {done.export.workspace_files} workspace entries "
                f"to {done.export.path}."
            )
        self.stdout.write(
            f"Deleted {tenant.slug}: {sum(done.rows.values())} rows, {done.schedules} schedules, "
            f"{done.cache_keys} cache keys, {done.containers_removed} containers"
            + (
                ", its workspaces."
                if done.workspace_removed
                else "; its workspace directory could not be removed."
            )
        )
        if done.containers_left:
            self.stderr.write(
                f"{done.containers_left} containers could not be removed now; pruning removes them."
            )
