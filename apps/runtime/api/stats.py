"""Aggregates for the Overview: tool calls over time, the top tools and agents, and what waits for a
person ("needs you"). Each figure comes from its own app's selectors; this module only composes them.

Who sees what: admins and owners read the tenant's figures; members and viewers read their own version
(the tool calls made and the runs started by themselves or by the API keys they made; with an API key,
by that key), and of what waits for a person only what is theirs to follow: the approvals their calls
asked for, the access requests they made and their failed runs. Figures a role does not see are null."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit import selectors as audit_selectors
from apps.mcp_grants import selectors as mcp_selectors
from apps.policy import selectors as policy_selectors
from apps.runs import selectors as run_selectors
from apps.teams import selectors as team_selectors
from apps.tenants import selectors as tenant_selectors
from apps.tenants.actors import Actor
from apps.tenants.api.base import StrictSerializer, TenantViewMixin
from apps.tenants.roles import Role

RANGE_PARAMETER = OpenApiParameter(
    "range",
    str,
    enum=list(audit_selectors.STATS_RANGES),
    description="hour: 60 buckets of 1 minute; day: 24 of 1 hour (default); week: 28 of 6 hours. "
    "Buckets are aligned to whole multiples of their width (UTC) and the last one holds now.",
)


SCOPE_HELP = "tenant: the tenant's figures (admins and owners); own: the caller's own (everyone else)"


class RangeInput(StrictSerializer):
    range = serializers.ChoiceField(choices=list(audit_selectors.STATS_RANGES), default="day")


def own_actors(actor: Actor) -> list[tuple[str, str]] | None:
    """The (kind, id) pairs whose calls and runs ``actor`` sees: None (the whole tenant) for admins and
    owners; a user's own and those of the API keys they made; an API key's own."""
    if actor.can(Role.ADMIN):
        return None
    pairs = [(str(actor.kind), actor.id)]
    if actor.kind == "user" and actor.user is not None:
        keys = tenant_selectors.api_key_ids_created_by(tenant=actor.tenant, user_id=actor.user.pk)
        pairs += [("api_key", key) for key in keys]
    return pairs


class _StatsView(TenantViewMixin, APIView):
    read_role = Role.VIEWER

    def stats_range(self, request: Request) -> audit_selectors.StatsRange:
        data = RangeInput(data=request.query_params.dict())
        data.is_valid(raise_exception=True)
        return audit_selectors.STATS_RANGES[data.validated_data["range"]]


class BucketOutput(serializers.Serializer):  # type: ignore[type-arg]
    start = serializers.DateTimeField()
    total = serializers.IntegerField()
    ok = serializers.IntegerField(help_text="the tool ran and succeeded")
    error = serializers.IntegerField(help_text="the tool ran and failed")
    denied = serializers.IntegerField(
        help_text="refused by the policy, the origin rules, the safeguard or a human"
    )
    refused = serializers.IntegerField(
        help_text="never ran for another reason: unknown tool, invalid arguments, rate limited, unavailable"
    )
    p50_ms = serializers.FloatField(allow_null=True, help_text="median duration of the calls that ran")
    p95_ms = serializers.FloatField(
        allow_null=True, help_text="95th percentile duration of the calls that ran"
    )
    error_rate = serializers.FloatField(allow_null=True, help_text="error / total; null for an empty bucket")


class SeriesOutput(serializers.Serializer):  # type: ignore[type-arg]
    scope = serializers.CharField(help_text=SCOPE_HELP)
    range = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    bucket_seconds = serializers.IntegerField()
    buckets = BucketOutput(many=True)


class ToolCallSeriesView(_StatsView):
    """Tool calls over time: per bucket the count of each outcome, p50/p95 latency and the error rate."""

    @extend_schema(parameters=[RANGE_PARAMETER], responses={200: SeriesOutput})
    def get(self, request: Request) -> Response:
        actors = own_actors(self.actor)
        series = audit_selectors.tool_call_series(
            tenant=self.actor.tenant, stats_range=self.stats_range(request), actors=actors
        )
        return Response(SeriesOutput({"scope": _scope(actors), **series}).data)


class TopRowOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    calls = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="calls that ran and failed")


class TopOutput(serializers.Serializer):  # type: ignore[type-arg]
    scope = serializers.CharField(help_text=SCOPE_HELP)
    range = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    tools = TopRowOutput(many=True)
    agents = TopRowOutput(many=True)


class ToolCallTopView(_StatsView):
    """The ten tools and the ten agents with the most calls in the range, most first."""

    @extend_schema(parameters=[RANGE_PARAMETER], responses={200: TopOutput})
    def get(self, request: Request) -> Response:
        actors = own_actors(self.actor)
        stats_range = self.stats_range(request)
        start, end = audit_selectors.stats_window(stats_range)
        tenant = self.actor.tenant
        body = {
            "scope": _scope(actors),
            "range": stats_range.name,
            "start": start,
            "end": end,
            "tools": audit_selectors.tool_call_top(
                tenant=tenant, stats_range=stats_range, field="tool", actors=actors
            ),
            "agents": audit_selectors.tool_call_top(
                tenant=tenant, stats_range=stats_range, field="agent_key", actors=actors
            ),
        }
        return Response(TopOutput(body).data)


class ApprovalsWaitingOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    first_expires_at = serializers.DateTimeField(allow_null=True, help_text="when the first one expires")
    seconds_left = serializers.IntegerField(allow_null=True, help_text="until the first one expires")


class NeedsYouOutput(serializers.Serializer):  # type: ignore[type-arg]
    scope = serializers.CharField(help_text=SCOPE_HELP)
    range = serializers.CharField()
    approvals_waiting = ApprovalsWaitingOutput()
    open_escalations = serializers.IntegerField(allow_null=True, help_text="null: admins and owners only")
    pending_access_requests = serializers.IntegerField()
    mcp_servers_not_connected = serializers.IntegerField(
        allow_null=True,
        help_text="enabled servers in error, disconnected or never reached; null: admins only",
    )
    failed_runs = serializers.IntegerField(help_text="runs created in the range that failed")


class NeedsYouView(_StatsView):
    """What waits for a person: approvals waiting (with the time left of the first to expire), open
    escalations, pending MCP access requests, MCP servers not connected, and failed runs in the range."""

    @extend_schema(parameters=[RANGE_PARAMETER], responses={200: NeedsYouOutput})
    def get(self, request: Request) -> Response:
        actor = self.actor
        tenant = actor.tenant
        actors = own_actors(actor)
        stats_range = self.stats_range(request)
        start, _ = audit_selectors.stats_window(stats_range)
        admin = actors is None
        count, first_expiry = policy_selectors.approvals_waiting(tenant=tenant, requested_by=actors)
        body: dict[str, Any] = {
            "scope": _scope(actors),
            "range": stats_range.name,
            "approvals_waiting": {
                "count": count,
                "first_expires_at": first_expiry,
                "seconds_left": _seconds_left(first_expiry),
            },
            "open_escalations": team_selectors.open_escalation_total(tenant=tenant) if admin else None,
            "pending_access_requests": mcp_selectors.pending_request_count(actor),
            "mcp_servers_not_connected": (
                mcp_selectors.servers_not_connected_count(tenant=tenant) if admin else None
            ),
            "failed_runs": run_selectors.failed_run_count(tenant=tenant, since=start, starters=actors),
        }
        return Response(NeedsYouOutput(body).data)


def _scope(actors: list[tuple[str, str]] | None) -> str:
    return "tenant" if actors is None else "own"


def _seconds_left(when: Any) -> int | None:
    if when is None:
        return None
    from_now = when - timezone.now()
    return max(0, int(from_now.total_seconds()))
