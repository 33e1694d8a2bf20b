from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.tenants import services
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
        with transaction.atomic():
            tenant = Tenant.objects.filter(slug=DEMO_SLUG).first()
            if tenant is None:
                tenant = services.tenant_create(slug=DEMO_SLUG, name="Demo")
            system = Actor.system(tenant)
            User = get_user_model()
            owner = User.objects.filter(email__iexact=DEMO_OWNER).first()
            if owner is None or not password_file.exists():
                password = f"demo-{secrets.token_urlsafe(12)}"
                if owner is None:
                    services.membership_create(
                        actor=system, email=DEMO_OWNER, role=Role.OWNER, password=password
                    )
                else:
                    owner.set_password(password)
                    owner.save(update_fields=["password"])
                password_file.write_text(password)
                password_file.chmod(0o600)
            else:
                password = password_file.read_text().strip()
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
