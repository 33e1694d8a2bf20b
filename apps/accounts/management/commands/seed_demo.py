from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey, Membership, Tenant
from apps.tenants.roles import Role

DEMO_SLUG = "demo"
DEMO_OWNER = "owner@demo.toolgate.local"
DEMO_KEY_NAME = "demo key"


class Command(BaseCommand):
    help = "Create the demo tenant, its owner, an API key and a demo agent (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        password_file = settings.DATA_DIR / "demo_owner_password"
        new_password: str | None = None
        with transaction.atomic():
            tenant = Tenant.objects.filter(slug=DEMO_SLUG).first()
            if tenant is None:
                tenant = services.tenant_create(slug=DEMO_SLUG, name="Demo")
            system = Actor.system(tenant)
            owner = User.objects.filter(email__iexact=DEMO_OWNER).first()
            if owner is None:
                new_password = f"demo-{secrets.token_urlsafe(12)}"
                services.membership_create(
                    actor=system, email=DEMO_OWNER, role=Role.OWNER, password=new_password
                )
            else:
                if not password_file.exists():  # the printed password was lost: issue a new one
                    new_password = f"demo-{secrets.token_urlsafe(12)}"
                    owner.set_password(new_password)
                    owner.save(update_fields=["password"])
                if not Membership.objects.for_tenant(tenant).filter(user=owner).exists():
                    services.membership_create(actor=system, email=DEMO_OWNER, role=Role.OWNER)
            if not Agent.objects.for_tenant(tenant).filter(key="assistant").exists():
                services.agent_create(
                    actor=system,
                    key="assistant",
                    name="Demo assistant",
                    description="A demo agent to try the API and the dashboard with.",
                )
            existing = (
                ApiKey.objects.for_tenant(tenant).filter(name=DEMO_KEY_NAME, revoked_at__isnull=True).first()
            )
            raw = None
            if existing is None:
                _, raw = services.api_key_create(actor=system, name=DEMO_KEY_NAME, role=Role.ADMIN)
        # Only once the password is committed is it written down (owner-only file, replaced atomically).
        if new_password is not None:
            tmp = password_file.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(new_password)
            os.replace(tmp, password_file)
        password = new_password or password_file.read_text().strip()
        self.stdout.write(f"Demo tenant:     {tenant.slug}")
        self.stdout.write(f"Dashboard login: {DEMO_OWNER} / {password}")
        if raw is not None:
            self.stdout.write(f"Demo API key (admin, shown once, store it now): {raw}")
        else:
            assert existing is not None
            self.stdout.write(
                f"Demo API key:    {existing.prefix}… was shown when it was created; "
                f"make another with: manage.py create_api_key --tenant {DEMO_SLUG} --name NAME --role admin"
            )
