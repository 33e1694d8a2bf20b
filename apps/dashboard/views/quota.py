"""The tenant's quotas and what it uses of each (everyone in the tenant reads them; platform staff set
them: ``set_quota``, the platform page or ``PATCH /api/v1/tenant/quota``)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.runtime.quota_usage import usage
from apps.tenants.roles import Role

# A quota this full (or fuller) is shown as nearly reached.
WARN_FRACTION = 0.8


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def quota(request: DashboardRequest) -> HttpResponse:
    rows = []
    for row in usage(request.actor.tenant):
        fraction = (row.used / row.limit) if row.limit else 0.0
        rows.append(
            {
                "usage": row,
                "bytes": row.name == "workspace_bytes",
                "percent": min(100, round(fraction * 100)),
                "state": "full"
                if row.limit and row.used >= row.limit
                else "near"
                if fraction >= WARN_FRACTION
                else "ok",
            }
        )
    return render(request, "dashboard/quota.html", {"rows": rows})
