"""Reads of the audit log and of the tool-call records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import CharField, Count, F, Q, QuerySet, Value
from django.utils import timezone

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
    run: Any = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[ToolCall]:
    """The tenant's tool calls, newest first, without their stored outputs (a call's own page and the
    API's detail show them)."""
    qs = ToolCall.objects.for_tenant(tenant).defer("output", "output_for_user")
    filters = {
        "run_id": run,
        "agent_key": agent,
        "tool": tool,
        "decision": decision,
        "status": status,
        "session_key": session_key,
        "created_at__gte": since,
        "created_at__lt": until,
    }
    return qs.filter(**{k: v for k, v in filters.items() if v is not None}).order_by("-created_at", "-id")


def audit_event_get(*, tenant: Tenant, event_id: Any) -> AuditEvent | None:
    """One of the tenant's audit events, or None (another tenant's is None too)."""
    return AuditEvent.objects.for_tenant(tenant).filter(pk=event_id).first()


def tool_call_get(*, tenant: Tenant, call_id: Any) -> ToolCall | None:
    """One of the tenant's tool calls, or None (another tenant's is None too)."""
    return ToolCall.objects.for_tenant(tenant).filter(pk=call_id).first()


RELATED_EVENTS_LIMIT = 50


def tool_call_audit_events(*, tenant: Tenant, call: ToolCall) -> list[AuditEvent]:
    """The audit events written by the request that made ``call`` (they share its request id), oldest
    first, at most ``RELATED_EVENTS_LIMIT``: an approval asked for, a file written, a memory saved."""
    if not call.request_id:
        return []
    return list(
        AuditEvent.objects.for_tenant(tenant)
        .filter(request_id=call.request_id)
        .order_by("created_at", "id")[:RELATED_EVENTS_LIMIT]
    )


# Filter suggestions: distinct values of the tenant's recent rows, over the (tenant, time) index.
SUGGESTION_DAYS = 30
SUGGESTION_LIMIT = 50
SUGGESTION_SCAN = 5000  # rows looked at, newest first


def _distinct_recent(qs: QuerySet[Any], fields: Sequence[str], now: datetime | None) -> dict[str, list[str]]:
    """Per field of ``fields``, its distinct non-empty values in ``qs``'s newest ``SUGGESTION_SCAN`` rows
    of the last ``SUGGESTION_DAYS`` days (at most ``SUGGESTION_LIMIT``, sorted): one query, a
    ``UNION ALL`` of one bounded part per field."""
    since = (now or timezone.now()) - timedelta(days=SUGGESTION_DAYS)
    # The newest rows only, so the work stays the same however busy the tenant is.
    newest = qs.filter(created_at__gte=since).order_by("-created_at", "-id").values("pk")[:SUGGESTION_SCAN]
    recent = qs.filter(pk__in=newest)
    parts = [
        recent.exclude(**{field: ""})
        .annotate(field_name=Value(field, output_field=CharField()), value=F(field))
        .values_list("field_name", "value")
        .distinct()
        .order_by("value")[:SUGGESTION_LIMIT]
        for field in fields
    ]
    found: dict[str, list[str]] = {field: [] for field in fields}
    for field, value in parts[0].union(*parts[1:], all=True):
        found[field].append(value)
    return {field: sorted(values) for field, values in found.items()}


AUDIT_SUGGESTED = ("verb", "actor_id", "target_type")
TOOL_CALL_SUGGESTED = ("agent_key", "tool", "session_key")


def audit_event_suggestions(*, tenant: Tenant, now: datetime | None = None) -> dict[str, list[str]]:
    """Per filterable field, its distinct values in the tenant's last ``SUGGESTION_DAYS`` days (at most
    ``SUGGESTION_LIMIT``, sorted), in one query."""
    return _distinct_recent(AuditEvent.objects.for_tenant(tenant), AUDIT_SUGGESTED, now)


def tool_call_suggestions(*, tenant: Tenant, now: datetime | None = None) -> dict[str, list[str]]:
    """Like :func:`audit_event_suggestions`, for the tool calls' agent, tool and session key."""
    return _distinct_recent(ToolCall.objects.for_tenant(tenant), TOOL_CALL_SUGGESTED, now)


# --- aggregates of the tool calls (the Overview) ----------------------------------------------------------


@dataclass(frozen=True)
class StatsRange:
    """A fixed window of ``buckets`` buckets of ``step`` each, ending at the next boundary after now."""

    name: str
    step: timedelta
    buckets: int


STATS_RANGES = {
    "hour": StatsRange("hour", timedelta(minutes=1), 60),
    "day": StatsRange("day", timedelta(hours=1), 24),
    "week": StatsRange("week", timedelta(hours=6), 28),
}
TOP_LIMIT = 10
# Outcomes of a call: the tool ran and succeeded or failed, the policy (or the safeguard, the origin
# rules, a human) refused it, or it never ran for another reason (unknown tool, invalid arguments, rate
# limited, unavailable here).
DENIED_DECISIONS = (
    ToolCall.Decision.DENIED,
    ToolCall.Decision.ORIGIN_DENIED,
    ToolCall.Decision.APPROVAL_DENIED,
    ToolCall.Decision.SAFEGUARD,
)
OUTCOMES = ("ok", "error", "denied", "refused")

# Actors whose calls count: None for the whole tenant, else (kind, id) pairs.
ActorPairs = Sequence[tuple[str, str]] | None


def stats_window(stats_range: StatsRange, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The window's start and end: ``end`` is the first bucket boundary after ``now`` (boundaries are
    whole multiples of the step since the Unix epoch, UTC)."""
    now = now or timezone.now()
    step = stats_range.step.total_seconds()
    end_ts = (int(now.timestamp() // step) + 1) * step
    end = datetime.fromtimestamp(end_ts, tz=UTC)
    return end - stats_range.step * stats_range.buckets, end


# One query over the ``toolcall_tenant_time`` index; the actor filter is on when the first flag is false.
SERIES_SQL = f"""
SELECT date_bin(%(step)s::interval, created_at, %(start)s) AS bucket,
       count(*),
       count(*) FILTER (WHERE decision = 'allowed' AND status = 'ok'),
       count(*) FILTER (WHERE decision = 'allowed' AND status <> 'ok'),
       count(*) FILTER (WHERE decision = ANY(%(denied)s::varchar[])),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE decision = 'allowed'),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE decision = 'allowed')
  FROM {ToolCall._meta.db_table}
 WHERE tenant_id = %(tenant)s AND created_at >= %(start)s AND created_at < %(end)s
   AND (%(everyone)s OR (actor_kind, actor_id) IN (
        SELECT * FROM unnest(%(kinds)s::varchar[], %(ids)s::varchar[])))
 GROUP BY bucket
"""  # noqa: S608 (the only interpolation is the table name, a constant)


def tool_call_series(
    *, tenant: Tenant, stats_range: StatsRange, actors: ActorPairs = None, now: datetime | None = None
) -> dict[str, Any]:
    """The tenant's tool calls (with ``actors``, only theirs) in the window of ``stats_range``, bucketed:
    per bucket the count of each outcome, the median and 95th percentile of the duration of the calls
    that ran (decision ``allowed``), and the error rate (calls that ran and failed over all calls).
    One query over the ``toolcall_tenant_time`` index; every bucket is present, empty ones with zeros."""
    start, end = stats_window(stats_range, now)
    params: dict[str, Any] = {
        "step": stats_range.step,
        "start": start,
        "end": end,
        "tenant": tenant.pk,
        "denied": [str(d) for d in DENIED_DECISIONS],
        "everyone": actors is None,
        "kinds": [kind for kind, _ in actors or ()],
        "ids": [id_ for _, id_ in actors or ()],
    }
    with connection.cursor() as cursor:
        cursor.execute(SERIES_SQL, params)
        rows = {row[0]: row for row in cursor.fetchall()}
    buckets = []
    for index in range(stats_range.buckets):
        at = start + stats_range.step * index
        row = rows.get(at)
        total, ok, error, denied_n = (int(v) for v in row[1:5]) if row else (0, 0, 0, 0)
        buckets.append(
            {
                "start": at,
                "total": total,
                "ok": ok,
                "error": error,
                "denied": denied_n,
                "refused": total - ok - error - denied_n,
                "p50_ms": _ms(row[5]) if row else None,
                "p95_ms": _ms(row[6]) if row else None,
                "error_rate": round(error / total, 4) if total else None,
            }
        )
    return {
        "range": stats_range.name,
        "start": start,
        "end": end,
        "bucket_seconds": int(stats_range.step.total_seconds()),
        "buckets": buckets,
    }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def tool_call_top(
    *,
    tenant: Tenant,
    stats_range: StatsRange,
    field: str,
    actors: ActorPairs = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The ``TOP_LIMIT`` tools (``field="tool"``) or agents (``field="agent_key"``) with the most calls
    in the window, most first (ties by name), each with its count of calls that ran and failed."""
    if field not in {"tool", "agent_key"}:
        raise ValueError(f"unknown field {field!r}")
    start, end = stats_window(stats_range, now)
    calls = ToolCall.objects.for_tenant(tenant).filter(created_at__gte=start, created_at__lt=end)
    if actors is not None:
        mine = Q(pk__in=[])
        for kind, id_ in actors:
            mine |= Q(actor_kind=kind, actor_id=id_)
        calls = calls.filter(mine)
    rows = (
        calls.values(field)
        .annotate(calls=Count("id"), failed=Count("id", filter=Q(decision="allowed") & ~Q(status="ok")))
        .order_by("-calls", field)[:TOP_LIMIT]
    )
    return [{"name": row[field], "calls": row["calls"], "failed": row["failed"]} for row in rows]
