"""What the tenant lifecycle commands share: finding the tenant and naming who acted."""

from __future__ import annotations

import getpass

from django.core.management.base import CommandError

from apps.tenants.models import Tenant


def tenant_by_slug(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"No tenant with slug {slug!r}.")
    return tenant


def command_actor(name: str) -> str:
    """The platform log's actor of a command: the operating-system user who ran it."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (a container with an unnamed uid)
        user = "unknown"
    return f"command:{name}:{user}"
