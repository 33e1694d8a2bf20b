"""The custom tools API: define, read, change, delete and test-run a tenant's custom tools.

Viewers read tools (never an env value: variable names only); administrators create, change, delete
and test-run them. Every write goes through ``apps.custom_tools.services`` (audited, published on the
``custom_tools`` topic, and raising the tenant's configuration version, so the next call in every
process uses the change). Another tenant's tool is 404 whatever the method.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.custom_tools import selectors, services
from apps.custom_tools.access import access_custom_tool
from apps.custom_tools.api import serializers as s
from apps.custom_tools.models import CustomTool
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.selectors import agent_list


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class CustomToolViewSet(TenantScopedViewSet):
    """Custom tools of the tenant. A tool is global (``agent`` null) or one agent's (``agent``: its
    key), and an agent's own tool overrides a global one of the same name. ``name`` (a lower-case
    letter, then lower-case letters, digits or ``_``; at most 64), ``command`` (``{{.key}}`` is the
    argument ``key``, single-quoted for the shell), ``parameters`` (a JSON Schema of type object, checked
    against the meta-schema; every placeholder must be one of its properties), ``working_dir`` (relative
    to the agent's workspace), ``timeout_seconds`` (1-600, default 60), ``env`` (write-only, encrypted
    at rest; answers list the variable names), ``enabled`` (default true). Invalid fields are 400 by
    field; a built-in tool's name (or an alias's, a domain tool's, an MCP tool's) or a name in use in
    the same scope is 409.

    ``POST …/test`` (administrators) runs the tool once with sample ``args`` for an ``agent`` (an
    agent's own tool: its agent by default) through every step an agent's call takes, and answers the
    scrubbed output, the rendered command with secrets masked and the decision path."""

    model = CustomTool
    serializer_class = s.CustomToolOutput
    tool: CustomTool

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # One tool's routes find it before the method is dispatched: another tenant's is 404 for every
        # method, an unsupported one included.
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.tool = access_custom_tool(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        filters = s.CustomToolFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        agent = self._agent(params["agent"]) if params.get("agent") else None
        return selectors.custom_tool_list(
            tenant=self.actor.tenant,
            agent=agent,
            scope=params.get("scope"),
            enabled=params.get("enabled"),
            name=params.get("name"),
        )

    def _agent(self, key: str | None) -> Agent | None:
        """The tenant's agent with this key (None for None); an unknown key is 400 on ``agent``."""
        if key is None:
            return None
        agent = agent_list(tenant=self.actor.tenant).filter(key=key).first()
        if agent is None:
            message = f"no agent {key[:64]!r} in this tenant."
            raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
        return agent

    @extend_schema(parameters=[s.CustomToolFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.CustomToolOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.CustomToolOutput(self.tool).data)

    @extend_schema(request=s.CustomToolCreateInput, responses={201: s.CustomToolOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.CustomToolCreateInput, request)
        if "agent" in data:
            data["agent"] = self._agent(data["agent"])
        tool = services.custom_tool_create(actor=self.actor, **data)
        tool = access_custom_tool(actor=self.actor, id=tool.pk)
        return Response(s.CustomToolOutput(tool).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.CustomToolUpdateInput, responses={200: s.CustomToolOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        data = _body(s.CustomToolUpdateInput, request)
        if "agent" in data:
            data["agent"] = self._agent(data["agent"])
        services.custom_tool_update(actor=self.actor, tool=self.tool, **data)
        return Response(s.CustomToolOutput(access_custom_tool(actor=self.actor, id=pk)).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.custom_tool_delete(actor=self.actor, tool=self.tool)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.TestRunInput, responses={200: s.TestRunOutput})
    def test(self, request: Request, pk: str) -> Response:
        data = _body(s.TestRunInput, request)
        answer = services.custom_tool_test_run(
            actor=self.actor,
            tool=self.tool,
            agent=self._agent(data["agent"]),
            args=data["args"],
            user_id=data["user_id"],
        )
        return Response(answer)
