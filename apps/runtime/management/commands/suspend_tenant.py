from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.runtime.management.commands._tenant_command import command_actor, tenant_by_slug
from apps.runtime.tenant_lifecycle import tenant_suspend
from apps.tenants.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Suspend a tenant: its keys and logins answer 403 'tenant suspended', its runs are cancelled, its "
        "websockets closed, its sandboxes and MCP server processes stopped, its schedules skipped. Nothing "
        "is deleted; resume_tenant undoes it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--reason", default="", help="shown to the tenant's members and keys (500 chars)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["slug"])
        try:
            done = tenant_suspend(tenant=tenant, by=command_actor("suspend_tenant"), reason=options["reason"])
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Suspended {tenant.slug}: {done.runs_cancelled} runs cancelled, {done.containers_removed} "
            f"sandbox containers removed, {done.mcp_connections_closed} MCP connections closed here, "
            f"{done.jails_stopped} jails stopped on this host (other processes drop their MCP connections "
            "at their next health check; other hosts stop their commands within 2 s)."
        )
        if done.containers_left:
            self.stderr.write(
                f"{done.containers_left} containers could not be removed now (the engine refused); sandbox "
                "pruning removes them."
            )
