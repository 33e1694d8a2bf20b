"""The audit log: filterable, paginated, and updated live over the events websocket."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render

from apps.audit.selectors import audit_event_list
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import AuditFilterForm
from apps.tenants.roles import Role

PAGE_SIZE = 50


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def audit_log(request: DashboardRequest) -> HttpResponse:
    """Audit events, newest first. New events are prepended live on the first page only (later pages
    are a look at the past and must stay stable while read)."""
    filtering = any(name in request.GET for name in AuditFilterForm.base_fields)
    form = AuditFilterForm(request.GET if filtering else None)
    filters = form.filters()
    events = audit_event_list(tenant=request.actor.tenant, **filters)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/audit/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(filters),
            "live": page.number == 1 and "until" not in filters,
            "live_filters": {k: v for k, v in filters.items() if k not in {"since", "until"}},
        },
    )
