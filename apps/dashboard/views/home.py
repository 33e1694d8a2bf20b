"""The overview page."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from apps.audit.selectors import audit_event_list
from apps.dashboard.actor import DashboardRequest, dashboard_view
from apps.tenants import selectors
from apps.tenants.models import Tenant
from apps.tenants.roles import Role

RECENT_EVENTS = 10


def _usable_key_count(tenant: Tenant) -> int:
    keys = selectors.api_key_list(tenant=tenant, include_revoked=False)
    return keys.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())).count()


@dashboard_view(Role.VIEWER)
def home(request: DashboardRequest) -> HttpResponse:
    """Counts of agents, active keys and members, and the latest audit events (keys and audit events
    only for the roles that may see those sections)."""
    actor = request.actor
    tenant = actor.tenant
    can_admin = actor.can(Role.ADMIN)
    context = {
        "agent_count": selectors.agent_list(tenant=tenant).count(),
        "member_count": selectors.membership_list(tenant=tenant).count(),
        "key_count": _usable_key_count(actor.tenant) if can_admin else None,
        "recent_events": list(audit_event_list(tenant=tenant)[:RECENT_EVENTS]) if can_admin else None,
    }
    return render(request, "dashboard/home.html", context)
