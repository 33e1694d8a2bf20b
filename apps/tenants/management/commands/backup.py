from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import backups


class Command(BaseCommand):
    help = (
        "Back up the whole database (pg_dump of the embedded server, or of DATABASE_URL's) into one file. "
        "The field encryption key is not in it unless --include-key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the backup file to write (refused if it exists, unless --force)")
        parser.add_argument("--force", action="store_true", help="replace an existing file")
        parser.add_argument(
            "--database-name", help="back up this database on the same server instead of Toolgate's own"
        )
        parser.add_argument(
            "--include-key",
            action="store_true",
            help=f"also write the field encryption key to PATH{backups.KEY_SUFFIX} (mode 0600)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = backups.backup(
                Path(options["path"]),
                database_name=options["database_name"],
                force=options["force"],
                include_key=options["include_key"],
                out=self.stdout.write,
                verbose=options["verbosity"] >= 2,
            )
        except backups.BackupError as exc:
            raise CommandError(str(exc)) from None
        manifest = result.manifest
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {result.path} ({backups.human_size(result.size)}): "
                f'database "{manifest["database"]}", '
                f"{len(manifest['migrations'])} migrations, Toolgate {manifest['toolgate_version']}, "
                f"made {manifest['created_at']}."
            )
        )
        fingerprints = ", ".join(manifest["key_fingerprints"])
        self.stdout.write(
            "The secrets in this backup (MCP server headers, provider and channel keys, CLI credentials, "
            "pending calls) are encrypted with the field encryption key (fingerprint "
            f"{fingerprints}): they can only be decrypted with that key, which lives in "
            f"{backups.key_location()}."
        )
        if result.key_path is None:
            self.stdout.write(
                "The key is NOT in the backup. Keep a copy of it somewhere safe, apart from the backup: "
                "without it the restored secrets cannot be read (or pass --include-key)."
            )
        else:
            self.stdout.write(
                f"The key was written to {result.key_path} (mode 0600). Anyone holding both files can read "
                "every secret: store the key apart from the backup."
            )
