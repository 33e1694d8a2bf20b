"""The overview page."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from apps.audit.selectors import STATS_RANGES, audit_event_list
from apps.dashboard.actor import DashboardRequest, dashboard_view
from apps.realtime.events import TOPICS
from apps.tenants import selectors
from apps.tenants.models import Tenant
from apps.tenants.roles import Role

RECENT_EVENTS = 10
# The live topics after which the Overview reads its figures again (those the actor may subscribe to).
OVERVIEW_TOPICS = ("tool_calls", "runs", "approvals", "mcp")


def _usable_key_count(tenant: Tenant) -> int:
    keys = selectors.api_key_list(tenant=tenant, include_revoked=False)
    return keys.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())).count()


@dashboard_view(Role.VIEWER)
def home(request: DashboardRequest) -> HttpResponse:
    """What needs a person, charts of the tool calls (over time by outcome, latency, error rate, top
    tools and agents) for a range, counts of agents, active keys and members, and the latest audit
    events (keys and audit events only for the roles that may see those sections). The charts and the
    "needs you" figures are read by static/js/overview.js from the aggregate endpoints."""
    actor = request.actor
    tenant = actor.tenant
    can_admin = actor.can(Role.ADMIN)
    chosen = request.GET.get("range", "day")
    chosen = chosen if chosen in STATS_RANGES else "day"
    context = {
        "can_admin": can_admin,
        "can_member": actor.can(Role.MEMBER),
        "ranges": list(STATS_RANGES),
        "range": chosen,
        "overview_config": {
            "range": chosen,
            "urls": {
                "series": reverse("stats-tool-calls"),
                "top": reverse("stats-top"),
                "needs": reverse("stats-needs-you"),
            },
            "topics": [topic for topic in OVERVIEW_TOPICS if actor.can(TOPICS[topic])],
            "own": not can_admin,
        },
        "agent_count": selectors.agent_list(tenant=tenant).count(),
        "member_count": selectors.membership_list(tenant=tenant).count(),
        "key_count": _usable_key_count(actor.tenant) if can_admin else None,
        "recent_events": list(audit_event_list(tenant=tenant)[:RECENT_EVENTS]) if can_admin else None,
    }
    return render(request, "dashboard/home.html", context)
