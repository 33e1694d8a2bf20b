from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import api_key_create
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role


class Command(BaseCommand):
    help = "Create an API key for a tenant. The key is printed once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--role", choices=Role.values, default=Role.MEMBER)
        parser.add_argument(
            "--origin",
            default=ApiKey.Origin.USER,
            help="origin of the key's tool calls: user (default), comm (a channel integration), app or "
            "skill; never system",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug '{options['tenant']}'.")
        try:
            key, raw = api_key_create(
                actor=Actor.system(tenant),
                name=options["name"],
                role=options["role"],
                origin=options["origin"],
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Created API key {key.prefix}… '{key.name}' (role {key.role}, origin {key.origin}) "
            f"for tenant {tenant.slug}."
        )
        self.stdout.write("Store it now; it is not shown again:")
        self.stdout.write(raw)
