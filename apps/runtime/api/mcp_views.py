"""The resources and prompts of an agent's MCP servers over REST: what ``/mcp/<agent>/`` serves as
``resources/*`` and ``prompts/*``, for clients that are not MCP clients (and for the dashboard), under
the same grants, policy, scrubbing and records (``apps.runtime.mcp_features``). The call scope is in
the query string, as for ``GET /api/v1/agents/<key>/tools``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.policy.engine import CallScope
from apps.runtime import caller, mcp_features
from apps.tenants.access import access_runtime_agent
from apps.tenants.api.base import StrictSerializer, TenantViewMixin
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.roles import Role
from apps.toolkit.call_scope import CALL_SCOPE_PARAMETERS, CallScopeQueryInput

# A refusal of mcp_features as an HTTP status.
STATUS = {
    "invalid": 400,
    "not_found": 404,
    "conflict": 409,
    "too_many": 409,
    "too_large": 422,
    "unavailable": 502,
    "rate_limited": 429,
}


class ScopeQueryInput(CallScopeQueryInput):
    session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ReadQueryInput(ScopeQueryInput):
    uri = serializers.CharField(max_length=mcp_features.MAX_URI_CHARS)


class PromptInput(StrictSerializer):
    name = serializers.CharField(max_length=mcp_features.MAX_NAME_CHARS)
    # An object of strings; checked (types, sizes, count) as the MCP endpoint checks it.
    arguments = serializers.JSONField(required=False, default=dict)


def wire(item: Any) -> dict[str, Any]:
    """An MCP object as it travels (camelCase, no nulls)."""
    return dict(item.model_dump(by_alias=True, mode="json", exclude_none=True))


class _FeatureView(TenantViewMixin, APIView):
    query_input: type[ScopeQueryInput] = ScopeQueryInput

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Another tenant's agent (or none) is 404 whatever the method, before a 405."""
        super().initial(request, *args, **kwargs)
        access_runtime_agent(actor=self.actor, key=kwargs["key"])

    def who(self, request: Request, key: str) -> tuple[mcp_features.For, dict[str, Any]]:
        agent = access_runtime_agent(actor=self.actor, key=key)
        query = self.query_input(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params: dict[str, Any] = query.validated_data
        caller.check_channel(actor=self.actor, channel=params["channel"])
        scope = CallScope(
            provider=params["provider"],
            user_id=params["user_id"],
            channel=params["channel"],
            chat_id=params["chat_id"],
            subagent_depth=params["subagent_depth"],
        )
        who = mcp_features.For(
            actor=self.actor,
            agent=agent,
            scope=scope,
            tool_allow=CallScopeQueryInput.tool_allow_names(params["tool_allow"]),
            session_key=params["session_key"],
        )
        return who, params

    @staticmethod
    def refused(exc: mcp_features.FeatureRefused) -> ServiceError:
        code = ErrorCode.NOT_FOUND if exc.code == "not_found" else exc.code
        return ServiceError(code, str(exc), status=STATUS.get(exc.code, 400))


SCOPE = [*CALL_SCOPE_PARAMETERS, OpenApiParameter("session_key", OpenApiTypes.STR)]


class AgentResourcesView(_FeatureView):
    """The resources and resource templates of the agent's MCP servers that its grants and the policy
    give it, one server after another by name (viewers and up)."""

    @extend_schema(parameters=SCOPE, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, key: str) -> Response:
        who, _ = self.who(request, key)
        resources = mcp_features.list_resources(who)
        templates = mcp_features.list_resource_templates(who)
        return Response(
            {
                "agent": who.agent.key,
                "resources": [wire(item) for item in resources],
                "resource_templates": [wire(item) for item in templates],
            }
        )


class AgentResourceReadView(_FeatureView):
    """One resource, from the server that offers it (members and up): scrubbed, bounded and recorded
    like a tool call (the ``resources/read`` tool-call row)."""

    read_role = Role.MEMBER
    query_input = ReadQueryInput

    @extend_schema(
        parameters=[OpenApiParameter("uri", OpenApiTypes.STR, required=True), *SCOPE],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, key: str) -> Response:
        who, params = self.who(request, key)
        try:
            result = mcp_features.read_resource(who, params["uri"])
        except mcp_features.FeatureRefused as exc:
            raise self.refused(exc) from None
        return Response({"uri": params["uri"], "contents": [wire(item) for item in result.contents]})


class AgentPromptsView(_FeatureView):
    """The prompts of the agent's MCP servers, under their registered names (viewers and up)."""

    @extend_schema(parameters=SCOPE, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, key: str) -> Response:
        who, _ = self.who(request, key)
        return Response(
            {"agent": who.agent.key, "prompts": [wire(p) for p in mcp_features.list_prompts(who)]}
        )


class AgentPromptGetView(_FeatureView):
    """One prompt, from its server, with its arguments (members and up): scrubbed, bounded and recorded
    like a tool call (the ``prompts/get`` tool-call row)."""

    write_role = Role.MEMBER

    @extend_schema(parameters=SCOPE, request=PromptInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, key: str) -> Response:
        who, _ = self.who(request, key)
        body = PromptInput(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            result = mcp_features.get_prompt(
                who, body.validated_data["name"], body.validated_data["arguments"]
            )
        except mcp_features.FeatureRefused as exc:
            raise self.refused(exc) from None
        return Response({"name": body.validated_data["name"], **wire(result)})
