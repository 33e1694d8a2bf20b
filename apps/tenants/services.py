"""The writes of the tenancy primitives themselves. The administration of a tenant (its members, agents,
API keys and settings, each write recorded in the audit log) is ``apps.accounts.services``."""

from __future__ import annotations

from django.db.models import F
from django.dispatch import Signal

from apps.tenants.models import Tenant

# Sent by :func:`config_changed` (``tenant``): receivers tell whoever lists an agent's tools that the
# lists may have changed (the MCP endpoint's streams), with messages that go out when the change commits.
tools_may_have_changed = Signal()


def config_changed(tenant: Tenant) -> None:
    """Raise the tenant's ``config_version``: call it inside the transaction of every change to what
    decides an agent's tools, so that caches keyed by the version (``access.access_runtime_agent``) stop
    serving what came before, in every process, from the moment the change commits."""
    Tenant.objects.filter(pk=tenant.pk).update(config_version=F("config_version") + 1)
    tools_may_have_changed.send(sender=Tenant, tenant=tenant)
