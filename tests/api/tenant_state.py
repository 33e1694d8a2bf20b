"""A snapshot of everything a tenant owns, to prove that refused requests changed nothing."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model

from apps.tenants.models import Tenant
from apps.tenants.scoping import TenantScoped

# Bookkeeping that a request with the tenant's own key updates by itself (the key's "last used" time).
VOLATILE = {"last_used_at"}


def tenant_state(tenant: Tenant) -> dict[str, Any]:
    """Every row of every tenant-owned model of ``tenant`` (new models are included automatically),
    plus the tenant row and its members' user rows."""
    state: dict[str, Any] = {}
    for model in apps.get_models():
        if issubclass(model, TenantScoped):
            rows = model.objects.for_tenant(tenant).order_by("pk").values()
            state[model._meta.label] = [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]
    state["tenant"] = list(Tenant.objects.filter(pk=tenant.pk).values())
    user_ids = [row["user_id"] for row in state.get("tenants.Membership", [])]
    state["users"] = list(get_user_model().objects.filter(pk__in=user_ids).order_by("pk").values())
    return state
