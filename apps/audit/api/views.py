from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, renderers, serializers
from rest_framework.decorators import action
from rest_framework.request import Request

from apps.audit import export
from apps.audit.models import AuditEvent, ToolCall
from apps.audit.selectors import audit_event_list, tool_call_list
from apps.audit.services import audited_export
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.roles import Role


class _ExportRenderer(renderers.BaseRenderer):
    """Lets a client ask for the export with ``Accept: text/csv`` (or NDJSON) without a 406; the rows
    are streamed by the view (the ``format`` parameter picks them), so this renders only an error's
    body, as JSON."""

    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return renderers.JSONRenderer().render(data)


class CSVRenderer(_ExportRenderer):
    media_type = "text/csv"
    format = "csv"


class NDJSONRenderer(_ExportRenderer):
    media_type = "application/x-ndjson"
    format = "ndjson"


_EXPORT_RESPONSES = {(200, "text/csv"): OpenApiTypes.STR, (200, "application/x-ndjson"): OpenApiTypes.STR}
EXPORT_RENDERERS = [renderers.JSONRenderer, CSVRenderer, NDJSONRenderer]
_EXPORT_FORMAT = OpenApiParameter(
    "format", OpenApiTypes.STR, enum=list(export.FORMATS), description="csv (the default) or ndjson"
)


def _export(
    view: TenantScopedViewSet, filter_input: type[StrictSerializer], log: str
) -> StreamingHttpResponse:
    """The filtered rows of ``log`` streamed in the requested format, audited as the export starts."""
    params = view.request.query_params.dict()
    fmt = params.pop("format", "csv")
    if fmt not in export.FORMATS:
        raise serializers.ValidationError({"format": [f"One of: {', '.join(export.FORMATS)}."]})
    filters = filter_input(data=params)
    filters.is_valid(raise_exception=True)
    chosen = {k: v for k, v in filters.validated_data.items() if k not in {"cursor", "page_size"}}
    return audited_export(
        actor=view.actor, log=log, fmt=fmt, filters=chosen, asynchronous=export.is_asgi(view.request)
    )


class AuditEventOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    actor = serializers.SerializerMethodField()
    target = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "verb", "target", "data", "request_id", "ip"]
        read_only_fields = fields

    def get_actor(self, obj: AuditEvent) -> dict[str, str]:
        return {"kind": obj.actor_kind, "id": obj.actor_id, "label": obj.actor_label}

    def get_target(self, obj: AuditEvent) -> dict[str, str]:
        return {"type": obj.target_type, "id": obj.target_id}


class AuditFilterInput(StrictSerializer):
    verb = serializers.CharField(max_length=100, required=False)
    actor_kind = serializers.ChoiceField(choices=AuditEvent.ActorKind.choices, required=False)
    actor_id = serializers.CharField(max_length=64, required=False)
    target_type = serializers.CharField(max_length=100, required=False)
    target_id = serializers.CharField(max_length=100, required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


_FILTER_PARAMS = [
    OpenApiParameter("verb", OpenApiTypes.STR, description="exact verb, or a prefix ending in '*' or '.'"),
    OpenApiParameter("actor_kind", OpenApiTypes.STR, enum=AuditEvent.ActorKind.values),
    OpenApiParameter("actor_id", OpenApiTypes.STR),
    OpenApiParameter("target_type", OpenApiTypes.STR),
    OpenApiParameter("target_id", OpenApiTypes.STR),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="inclusive"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="exclusive"),
]


@extend_schema_view(
    list=extend_schema(parameters=_FILTER_PARAMS),
    export=extend_schema(parameters=[*_FILTER_PARAMS, _EXPORT_FORMAT], responses=_EXPORT_RESPONSES),
)
class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """The tenant's append-only audit log, newest first (admins and owners)."""

    model = AuditEvent
    serializer_class = AuditEventOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.ADMIN

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset
        filters = AuditFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = {k: v for k, v in filters.validated_data.items() if k not in {"cursor", "page_size"}}
        return audit_event_list(tenant=self.actor.tenant, **params)

    @action(detail=False, methods=["get"], url_path="export", renderer_classes=EXPORT_RENDERERS)
    def export(self, request: Request) -> StreamingHttpResponse:
        """The filtered events as CSV or NDJSON (at most 100,000 rows), streamed; the export is audited."""
        return _export(self, AuditFilterInput, "audit")


class ToolCallOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent_key")
    actor = serializers.SerializerMethodField()
    run = serializers.UUIDField(source="run_id", allow_null=True)

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "created_at",
            "agent",
            "tool",
            "resolved_tool",
            "args",
            "decision",
            "status",
            "error",
            "duration_ms",
            "for_llm_bytes",
            "for_user_bytes",
            "session_key",
            "run",
            "user_id",
            "channel",
            "chat_id",
            "origin",
            "provider",
            "subagent_depth",
            "actor",
            "request_id",
        ]
        read_only_fields = fields

    def get_actor(self, obj: ToolCall) -> dict[str, str]:
        return {"kind": obj.actor_kind, "id": obj.actor_id}


class ToolCallDetailOutput(ToolCallOutput):
    """One call with its stored result: ``output`` as the model got it (scrubbed), ``output_for_user``
    where the user's part differed, each at most 16,384 characters (``output_truncated`` says whether
    either was cut)."""

    class Meta(ToolCallOutput.Meta):
        fields = [*ToolCallOutput.Meta.fields, "output", "output_for_user", "output_truncated"]
        read_only_fields = fields


class ToolCallFilterInput(StrictSerializer):
    agent = serializers.CharField(max_length=64, required=False)
    tool = serializers.CharField(max_length=200, required=False)
    decision = serializers.ChoiceField(choices=ToolCall.Decision.choices, required=False)
    status = serializers.ChoiceField(choices=ToolCall.Status.choices, required=False)
    session_key = serializers.CharField(max_length=200, required=False)
    run = serializers.UUIDField(required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


_TOOL_CALL_FILTER_PARAMS = [
    OpenApiParameter("agent", OpenApiTypes.STR, description="agent key, exact"),
    OpenApiParameter("tool", OpenApiTypes.STR, description="the name as called, exact"),
    OpenApiParameter("decision", OpenApiTypes.STR, enum=ToolCall.Decision.values),
    OpenApiParameter("status", OpenApiTypes.STR, enum=ToolCall.Status.values),
    OpenApiParameter("session_key", OpenApiTypes.STR),
    OpenApiParameter("run", OpenApiTypes.UUID, description="the calls a run's model made"),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="inclusive"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="exclusive"),
]


@extend_schema_view(
    list=extend_schema(parameters=_TOOL_CALL_FILTER_PARAMS),
    retrieve=extend_schema(responses=ToolCallDetailOutput),
    export=extend_schema(
        parameters=[*_TOOL_CALL_FILTER_PARAMS, _EXPORT_FORMAT],
        responses=_EXPORT_RESPONSES,
    ),
)
class ToolCallViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Every tool call of the tenant, newest first (members and up); a call's own resource carries its
    stored result."""

    model = ToolCall
    serializer_class = ToolCallOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.MEMBER

    def get_serializer_class(self) -> Any:
        return ToolCallDetailOutput if self.action == "retrieve" else ToolCallOutput

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset
        filters = ToolCallFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = {k: v for k, v in filters.validated_data.items() if k not in {"cursor", "page_size"}}
        return tool_call_list(tenant=self.actor.tenant, **params)

    @action(detail=False, methods=["get"], url_path="export", renderer_classes=EXPORT_RENDERERS)
    def export(self, request: Request) -> StreamingHttpResponse:
        """The filtered calls as CSV or NDJSON (at most 100,000 rows), streamed; the export is audited."""
        return _export(self, ToolCallFilterInput, "tool_calls")
