"""The audit log: filterable, paginated, and updated live over the events websocket; each event's own
page, and the log's export."""

from __future__ import annotations

import uuid
from typing import cast

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from apps.audit import export
from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_event_get, audit_event_list, audit_event_suggestions
from apps.audit.services import audited_export
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import AuditFilterForm
from apps.tenants.roles import Role

PAGE_SIZE = 50
# The dashboard page of a target, by its type, for targets whose id is what the page's URL takes.
TARGET_PAGES = {
    "run": "dashboard:runs_detail",
    "session": "dashboard:runs_session",
    "tool_call": "dashboard:tool_call_detail",
    "audit_event": "dashboard:audit_event",
}


def _filter_form(request: DashboardRequest) -> AuditFilterForm:
    filtering = any(name in request.GET for name in AuditFilterForm.base_fields)
    return AuditFilterForm(request.GET if filtering else None)


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def audit_log(request: DashboardRequest) -> HttpResponse:
    """Audit events, newest first. New events are prepended live on the first page only (later pages
    are a look at the past and must stay stable while read). An invalid filter shows its error over an
    empty table: never rows the filter was meant to leave out."""
    tenant = request.actor.tenant
    form = _filter_form(request)
    filters = form.filters()
    events = audit_event_list(tenant=tenant, **filters)
    if form.errors:
        events = events.none()
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/audit/list.html",
        {
            "form": form,
            "page": page,
            "filtered": bool(filters) or bool(form.errors),
            "live": page.number == 1 and "until" not in filters and not form.errors,
            "live_filters": {k: v for k, v in filters.items() if k not in {"since", "until"}},
            "suggestions": audit_event_suggestions(tenant=tenant),
        },
    )


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def audit_export(request: DashboardRequest) -> HttpResponse:
    """The log with the page's filters, as CSV or NDJSON (``format``), streamed; audited as it starts
    (the export's own event is not among the exported rows)."""
    fmt = request.GET.get("format", "csv")
    form = _filter_form(request)
    filters = form.filters()
    if fmt not in export.FORMATS or form.errors:
        return HttpResponse(
            "Invalid export: check the format and the filters.", status=400, content_type="text/plain"
        )
    streamed = audited_export(
        actor=request.actor, log="audit", fmt=fmt, filters=filters, asynchronous=export.is_asgi(request)
    )
    # dashboard_view is typed for HttpResponse; Django serves a streamed one the same way.
    return cast(HttpResponse, streamed)


def target_url(event: AuditEvent) -> str | None:
    """The dashboard page of the event's target, where there is one."""
    if event.target_type == "approval":
        return reverse("dashboard:approvals")
    key = event.data.get("key") if isinstance(event.data, dict) else None
    if event.target_type == "agent" and isinstance(key, str) and key:
        try:  # the agent's page is named by its key, which the agent's events hold in their data
            return reverse("dashboard:agent_edit", kwargs={"key": key})
        except NoReverseMatch:
            return None
    name = TARGET_PAGES.get(event.target_type)
    if name is None or not event.target_id:
        return None
    try:
        return reverse(name, kwargs={"id": uuid.UUID(event.target_id)})
    except (ValueError, NoReverseMatch):
        return None


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def audit_event_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One event: every field, its data pretty-printed, and links to its target and its actor's events."""
    event = audit_event_get(tenant=request.actor.tenant, event_id=id)
    if event is None:
        raise Http404("No such audit event.")
    return render(request, "dashboard/audit/detail.html", {"event": event, "target_url": target_url(event)})
