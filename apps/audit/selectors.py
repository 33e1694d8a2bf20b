"""Reads of the audit log and of the tool-call records."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from apps.audit.models import AuditEvent, ToolCall
from apps.tenants.models import Tenant


def audit_event_list(
    *,
    tenant: Tenant,
    verb: str | None = None,
    actor_kind: str | None = None,
    actor_id: str | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEvent]:
    """The tenant's audit events, newest first. ``verb`` ending in ``.`` or ``*`` matches a prefix."""
    qs = AuditEvent.objects.for_tenant(tenant)
    if verb:
        if verb.endswith("*") or verb.endswith("."):
            qs = qs.filter(verb__startswith=verb.rstrip("*"))
        else:
            qs = qs.filter(verb=verb)
    if actor_kind:
        qs = qs.filter(actor_kind=actor_kind)
    if actor_id:
        qs = qs.filter(actor_id=actor_id)
    if target_type:
        qs = qs.filter(target_type=target_type)
    if target_id:
        qs = qs.filter(target_id=target_id)
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    return qs.order_by("-created_at", "-id")


def tool_call_list(
    *,
    tenant: Tenant,
    agent: str | None = None,
    tool: str | None = None,
    decision: str | None = None,
    status: str | None = None,
    session_key: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[ToolCall]:
    """The tenant's tool calls, newest first."""
    qs = ToolCall.objects.for_tenant(tenant)
    filters = {
        "agent_key": agent,
        "tool": tool,
        "decision": decision,
        "status": status,
        "session_key": session_key,
        "created_at__gte": since,
        "created_at__lt": until,
    }
    return qs.filter(**{k: v for k, v in filters.items() if v is not None}).order_by("-created_at", "-id")
