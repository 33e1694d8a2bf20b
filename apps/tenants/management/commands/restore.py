from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import backups


class Command(BaseCommand):
    help = (
        "Replace the whole database with a backup made by `backup`: restored into a new database, migrated "
        "if older, then swapped in. Needs --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the backup file")
        parser.add_argument(
            "--yes", action="store_true", help="confirm: the database is replaced, its current data lost"
        )
        parser.add_argument(
            "--key-file",
            type=Path,
            help="the backup's field encryption key (the file `backup --include-key` wrote), when it is not "
            "the key Toolgate uses now",
        )
        parser.add_argument(
            "--database-name",
            help="restore into this database on the same server instead of Toolgate's own (it is created, "
            "or replaced)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        target = backups.configured_server(options["database_name"])
        if not options["yes"]:
            raise CommandError(
                f"restore replaces the whole {target.describe()} with the backup: every tenant, key, "
                "audit row and tool datum now in it is lost. Stop Toolgate's processes, then run it again "
                "with --yes."
            )
        try:
            result = backups.restore(
                path,
                database_name=options["database_name"],
                key_file=options["key_file"],
                out=self.stdout.write,
                verbose=options["verbosity"] >= 2,
            )
        except backups.BackupError as exc:
            raise CommandError(str(exc)) from None
        manifest = result.manifest
        done = "replaced" if result.replaced else "created"
        migrated = (
            f"applied {len(result.migrated)} migration(s) the backup lacked"
            if result.migrated
            else "no migration needed"
        )
        self.stdout.write(
            self.style.SUCCESS(
                f'Restored {path} into "{result.database}" ({done}; {migrated}). Backup made '
                f"{manifest['created_at']} by Toolgate {manifest.get('toolgate_version', 'unknown')}."
            )
        )
        if result.key_note:
            self.stdout.write(self.style.WARNING(result.key_note))
        self.stdout.write("Start Toolgate again (or restart its processes) to serve the restored data.")
