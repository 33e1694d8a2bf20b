from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.runtime.management.commands._tenant_command import tenant_by_slug
from apps.runtime.quota_usage import usage


class Command(BaseCommand):
    help = "Show a tenant's quotas: the limit, where it comes from, and what the tenant uses now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["slug"])
        self.stdout.write(f"Quotas of {tenant.slug} ({tenant.status}):")
        self.stdout.write(f"{'quota':<24} {'limit':>16} {'used':>16}  source")
        for row in usage(tenant):
            limit = "no limit" if row.limit == 0 else str(row.limit)
            source = "tenant" if row.overridden else "default"
            self.stdout.write(f"{row.name:<24} {limit:>16} {row.used:>16}  {source}")
