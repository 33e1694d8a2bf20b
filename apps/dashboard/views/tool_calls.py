"""The tool-call log: every call through the pipeline, filterable, paginated and updated live; each
call's own page, and the log's export."""

from __future__ import annotations

import uuid
from typing import cast

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render

from apps.audit import export
from apps.audit.models import ToolCall
from apps.audit.selectors import tool_call_audit_events, tool_call_get, tool_call_list, tool_call_suggestions
from apps.audit.services import audited_export
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import ToolCallFilterForm
from apps.runs.selectors import run_get
from apps.sessions.models import Session
from apps.sessions.selectors import session_by_key
from apps.tenants.roles import Role

PAGE_SIZE = 50
# Filters a live row is checked against in the browser (time bounds are handled by when live is on).
LIVE_FILTERS = ("agent", "tool", "decision", "status", "session_key", "run")


def _filter_form(request: DashboardRequest) -> ToolCallFilterForm:
    filtering = any(name in request.GET for name in ToolCallFilterForm.base_fields)
    return ToolCallFilterForm(request.GET if filtering else None)


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def tool_call_log(request: DashboardRequest) -> HttpResponse:
    """Tool calls, newest first. Like the audit log, new calls are prepended live on the first page
    only and not with an "until" filter (those pages look at the past and must stay stable). An invalid
    filter shows its error over an empty table: never rows the filter was meant to leave out."""
    tenant = request.actor.tenant
    form = _filter_form(request)
    filters = form.filters()
    calls = tool_call_list(tenant=tenant, **filters)
    if form.errors:
        calls = calls.none()
    page = Paginator(calls, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/tool_calls/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(filters) or bool(form.errors),
            "live": page.number == 1 and "until" not in filters and not form.errors,
            "live_config": {
                "filters": {k: v for k, v in filters.items() if k in LIVE_FILTERS},
                "decisions": dict(ToolCall.Decision.choices),
            },
            "suggestions": tool_call_suggestions(tenant=tenant),
        },
    )


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def tool_call_export(request: DashboardRequest) -> HttpResponse:
    """The log with the page's filters, as CSV or NDJSON (``format``), streamed; audited as it starts."""
    fmt = request.GET.get("format", "csv")
    form = _filter_form(request)
    filters = form.filters()
    if fmt not in export.FORMATS or form.errors:
        return HttpResponse(
            "Invalid export: check the format and the filters.", status=400, content_type="text/plain"
        )
    streamed = audited_export(
        actor=request.actor, log="tool_calls", fmt=fmt, filters=filters, asynchronous=export.is_asgi(request)
    )
    # dashboard_view is typed for HttpResponse; Django serves a streamed one the same way.
    return cast(HttpResponse, streamed)


@dashboard_view(Role.MEMBER, methods=READ_ONLY)
def tool_call_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One call: its arguments, outcome, timing and context, and the audit events its request wrote
    (among them the approval it asked for, if any)."""
    tenant = request.actor.tenant
    call = tool_call_get(tenant=tenant, call_id=id)
    if call is None:
        raise Http404("No such tool call.")
    related = tool_call_audit_events(tenant=tenant, call=call)
    session: Session | None = None
    if call.session_key and call.agent is not None:
        session = session_by_key(tenant=tenant, agent=call.agent, key=call.session_key)
    approvals = [event for event in related if event.target_type == "approval"]
    run = run_get(tenant=tenant, id=call.run_id) if call.run_id else None
    return render(
        request,
        "dashboard/tool_calls/detail.html",
        {
            "call": call,
            "related": related,
            "session": session,
            "run": run,
            "approval": approvals[0] if approvals else None,
            "can_see_audit": request.actor.can(Role.ADMIN),
        },
    )
