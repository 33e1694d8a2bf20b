from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit.models import ToolCall
from apps.runtime import pipeline
from apps.runtime.api import serializers as s
from apps.runtime.selectors import tool_call_list
from apps.tenants.access import runtime_agent
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.roles import Role
from apps.tools import presentation

# What an omitted "context" means (the defaults of CallContextInput).
DEFAULT_CONTEXT: dict[str, Any] = {
    "session_key": "",
    "user_id": "",
    "channel": "",
    "chat_id": "",
    "peer_kind": "",
    "provider": "",
    "origin": "user",
    "subagent_depth": 0,
    "tool_allow": None,
}


class ExecuteView(TenantViewMixin, APIView):
    """Run one tool call for an agent. A tool's own failure is 200 with ``is_error: true``."""

    write_role = Role.MEMBER

    @extend_schema(request=s.ExecuteInput, responses={200: s.ExecuteOutput})
    def post(self, request: Request) -> Response:
        data = s.ExecuteInput(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        agent = runtime_agent(actor=self.actor, key=body["agent"])
        context = body.get("context") or DEFAULT_CONTEXT
        tool_allow = context.get("tool_allow")
        outcome = pipeline.execute(
            actor=self.actor,
            request=pipeline.CallRequest(
                agent=agent,
                tool=body["tool"],
                args=dict(body.get("args") or {}),
                session_key=context["session_key"],
                user_id=context["user_id"],
                channel=context["channel"],
                chat_id=context["chat_id"],
                peer_kind=context["peer_kind"],
                provider=context["provider"],
                origin=context["origin"],
                subagent_depth=context["subagent_depth"],
                tool_allow=tuple(tool_allow) if tool_allow is not None else None,
                style=body["style"],
            ),
        )
        return Response(
            {
                "call_id": outcome.call_id,
                "for_llm": outcome.result.for_llm,
                "for_user": outcome.result.for_user,
                "is_error": outcome.result.is_error,
                "duration_ms": outcome.duration_ms,
            }
        )


class AgentToolsView(TenantViewMixin, APIView):
    """The tool definitions this agent may use now, sorted by name (stable for prompt caching)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("format", OpenApiTypes.STR, enum=list(presentation.FORMATS)),
            OpenApiParameter("style", OpenApiTypes.STR, enum=list(presentation.STYLES)),
            OpenApiParameter("provider", OpenApiTypes.STR),
            OpenApiParameter("user_id", OpenApiTypes.STR),
            OpenApiParameter("channel", OpenApiTypes.STR),
            OpenApiParameter("chat_id", OpenApiTypes.STR),
            OpenApiParameter("subagent_depth", OpenApiTypes.INT),
            OpenApiParameter(
                "tool_allow", OpenApiTypes.STR, description="comma-separated, a final intersection"
            ),
            OpenApiParameter("include_unavailable", OpenApiTypes.BOOL),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, key: str) -> Response:
        agent = runtime_agent(actor=self.actor, key=key)
        query = s.ToolsQueryInput(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params: dict[str, Any] = query.validated_data
        raw_allow = params["tool_allow"]
        tool_allow = tuple(n.strip() for n in raw_allow.split(",") if n.strip()) if raw_allow else None
        allowed = pipeline.allowed_tools(
            agent,
            tenant=self.actor.tenant,
            provider=params["provider"],
            user_id=params["user_id"],
            channel=params["channel"],
            chat_id=params["chat_id"],
            subagent_depth=params["subagent_depth"],
            tool_allow=tool_allow,
        )
        names = allowed if params["include_unavailable"] else presentation.runnable(allowed)
        definitions = presentation.plain_definitions(names, params["style"])
        return Response(
            {
                "agent": agent.key,
                "style": params["style"],
                "format": params["format"],
                "count": len(definitions),
                "tools": presentation.render(definitions, params["format"]),
            }
        )


class ToolCallViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Every tool call of the tenant, newest first (members and up)."""

    model = ToolCall
    serializer_class = s.ToolCallOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.MEMBER

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset
        filters = s.ToolCallFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = {k: v for k, v in filters.validated_data.items() if k not in {"cursor", "page_size"}}
        return tool_call_list(tenant=self.actor.tenant, **params)
