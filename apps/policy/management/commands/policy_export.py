from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.policy.services import policy_export
from apps.tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Print a tenant's whole tool policy (tenant, agents, channel groups) as JSON with a stable key "
        "order, in the form policy_import and PUT /api/v1/policy/export take."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--output", help="write to this file instead of standard output")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug '{options['tenant']}'.")
        text = json.dumps(policy_export(tenant), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        if options["output"]:
            try:
                Path(options["output"]).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"Cannot write {options['output']}: {exc.strerror or exc}") from None
            self.stderr.write(f"Wrote the policy of tenant {tenant.slug} to {options['output']}.")
        else:
            self.stdout.write(text, ending="")
