from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from apps.policy.services import Imported, policy_import
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Tenant

MAX_BYTES = 16 * 1024 * 1024


class _DryRun(Exception):
    def __init__(self, imported: Imported) -> None:
        self.imported = imported


class Command(BaseCommand):
    help = (
        "Replace a tenant's whole tool policy with a JSON document (policy_export's form) as the tenant's "
        "system actor. Everything is validated first: on any error nothing changes and every error is "
        "printed. Scopes the document leaves out lose their policy. --dry-run reports what would change."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("file", help="the JSON document, or - for standard input")
        parser.add_argument(
            "--dry-run", action="store_true", help="validate and report what would change; change nothing"
        )

    def _read(self, name: str, stdin: IO[str]) -> Any:
        try:
            if name == "-":
                text = stdin.read(MAX_BYTES + 1)
            else:
                with Path(name).open(encoding="utf-8") as handle:
                    text = handle.read(MAX_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"Cannot read {name}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CommandError(f"{name} is not UTF-8 text.") from None
        if len(text) > MAX_BYTES:
            raise CommandError(f"{name} is larger than {MAX_BYTES // (1024 * 1024)} MiB.")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{name} is not valid JSON: {exc}") from None

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug '{options['tenant']}'.")
        bundle = self._read(options["file"], options.get("stdin") or sys.stdin)
        actor = Actor.system(tenant)
        dry_run = bool(options["dry_run"])
        try:
            if dry_run:
                # The real import, rolled back: the report is exactly what a real run would do.
                try:
                    with transaction.atomic():
                        raise _DryRun(policy_import(actor, bundle))
                except _DryRun as done:
                    imported = done.imported
            else:
                imported = policy_import(actor, bundle)
        except ServiceError as exc:
            lines = [f"  {path}: {message}" for path, messages in exc.details.items() for message in messages]
            raise CommandError(
                "The policy is invalid; nothing was changed:\n" + ("\n".join(lines) or f"  {exc.message}")
            ) from None
        for warning in imported.warnings:
            self.stdout.write(f"warning: {warning}")
        verb = "would change" if dry_run else "changed"
        if imported.changed:
            self.stdout.write(f"{verb}: {', '.join(imported.changed)}")
        else:
            self.stdout.write(f"Nothing {verb} in tenant {tenant.slug}.")
        if dry_run:
            self.stdout.write("Dry run: nothing was changed.")
