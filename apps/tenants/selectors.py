"""Reads of the tenants app."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.tenants.models import Agent, ApiKey, Membership, Tenant


def agent_list(*, tenant: Tenant, search: str | None = None) -> QuerySet[Agent]:
    qs = Agent.objects.for_tenant(tenant)
    if search:
        qs = qs.filter(Q(key__icontains=search) | Q(name__icontains=search))
    return qs.order_by("key")


def api_key_list(*, tenant: Tenant, include_revoked: bool = True) -> QuerySet[ApiKey]:
    qs = ApiKey.objects.for_tenant(tenant).select_related("created_by")
    if not include_revoked:
        qs = qs.filter(revoked_at__isnull=True)
    return qs.order_by("-created_at", "id")


def membership_list(*, tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.for_tenant(tenant).select_related("user").order_by("created_at", "id")


def tenants_of_user(*, user_id: int) -> QuerySet[Membership]:
    """A user's memberships across tenants (the dashboard's tenant switcher)."""
    return (
        Membership.objects.dangerously_all_tenants()
        .select_related("tenant")
        .filter(user_id=user_id, tenant__status=Tenant.Status.ACTIVE)
        .order_by("tenant__slug")
    )
