"""Reads of MCP access requests, always within one tenant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from apps.mcp_grants.models import AccessRequest
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.tenants.models import Tenant


def pending_requests(tenant: Tenant) -> TenantQuerySet[AccessRequest]:
    """The tenant's pending requests, oldest first (B §3.4 ``ListPendingRequests``)."""
    return (
        AccessRequest.objects.for_tenant(tenant)
        .filter(status=AccessRequest.Status.PENDING)
        .select_related("server", "agent")
        .order_by("created_at", "id")
    )
