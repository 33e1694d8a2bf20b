from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import tenant_create
from apps.tenants.errors import ServiceError


class Command(BaseCommand):
    help = "Create a tenant, optionally with its first owner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--owner-email")
        parser.add_argument("--owner-password")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant = tenant_create(
                slug=options["slug"],
                name=options["name"],
                owner_email=options["owner_email"],
                owner_password=options["owner_password"],
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Created tenant {tenant.slug} ({tenant.pk})")
