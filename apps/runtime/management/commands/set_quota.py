from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.runtime.management.commands._tenant_command import command_actor, tenant_by_slug
from apps.runtime.tenant_lifecycle import tenant_quota_set
from apps.tenants import quotas
from apps.tenants.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Set one quota of a tenant: a whole number (0: no limit) or 'default' for the installation's "
        f"default. Quotas: {', '.join(quotas.NAMES)}. Takes effect at once, in every process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("name", choices=quotas.NAMES)
        parser.add_argument("value", help="a whole number of 0 or more (0: no limit), or 'default'")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["slug"])
        name, value = options["name"], options["value"]
        try:
            updated = tenant_quota_set(tenant=tenant, by=command_actor("set_quota"), changes={name: value})
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        now = quotas.limit(updated, name)
        shown = "no limit" if now.unlimited else str(now.value)
        source = "tenant override" if now.overridden else "installation default"
        self.stdout.write(f"{tenant.slug}: {name} = {shown} ({source}).")
