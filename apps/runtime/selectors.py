"""Reads of tool-call records."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from apps.audit.models import ToolCall
from apps.tenants.models import Tenant


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
