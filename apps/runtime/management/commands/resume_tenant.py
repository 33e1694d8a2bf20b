from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.runtime.management.commands._tenant_command import command_actor, tenant_by_slug
from apps.runtime.tenant_lifecycle import tenant_resume
from apps.tenants.errors import ServiceError


class Command(BaseCommand):
    help = "Resume a suspended tenant: its keys, logins, websockets, schedules and MCP servers work again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["slug"])
        try:
            tenant_resume(tenant=tenant, by=command_actor("resume_tenant"))
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Resumed {tenant.slug}. Runs cancelled by the suspension stay cancelled.")
