"""The tool-call log: every call through the pipeline, filterable, paginated and updated live."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render

from apps.audit.models import ToolCall
from apps.audit.selectors import tool_call_list
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import ToolCallFilterForm
from apps.tenants.roles import Role

PAGE_SIZE = 50
# Filters a live row is checked against in the browser (time bounds are handled by when live is on).
LIVE_FILTERS = ("agent", "tool", "decision", "status", "session_key")


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def tool_call_log(request: DashboardRequest) -> HttpResponse:
    """Tool calls, newest first. Like the audit log, new calls are prepended live on the first page
    only and not with an "until" filter (those pages look at the past and must stay stable)."""
    filtering = any(name in request.GET for name in ToolCallFilterForm.base_fields)
    form = ToolCallFilterForm(request.GET if filtering else None)
    filters = form.filters()
    calls = tool_call_list(tenant=request.actor.tenant, **filters)
    page = Paginator(calls, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/tool_calls/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(filters),
            "live": page.number == 1 and "until" not in filters,
            "live_config": {
                "filters": {k: v for k, v in filters.items() if k in LIVE_FILTERS},
                "decisions": dict(ToolCall.Decision.choices),
            },
        },
    )
