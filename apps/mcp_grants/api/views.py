"""The MCP API: servers and their discovered tools, agent and user grants, users' own credentials, and
access requests with their review.

Servers and their tools are read by viewers; everything that configures (servers, grants, credentials)
and reading grants and credentials needs an administrator. Members (and up) ask for access; an
administrator sees every request of the tenant and decides it, anyone else sees only their own.

Every route under ``mcp/servers/<name>/`` resolves the server inside the caller's tenant first, so
another tenant's server is 404 whatever the method. Every write goes through
``apps.mcp_grants.services`` (audited, published on the ``mcp`` topic; grants also raise the tenant's
configuration version so the next tool listing already reflects them). Secrets are write-only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.mcp_grants import selectors, services
from apps.mcp_grants.access import (
    access_agent_grant,
    access_credential,
    access_request,
    access_server,
    access_user_grant,
)
from apps.mcp_grants.api import serializers as s
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
)
from apps.tenants.access import access_agent
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


def _filters(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.query_params.dict())
    data.is_valid(raise_exception=True)
    return {k: v for k, v in data.validated_data.items() if k not in {"cursor", "page_size"}}


# --- servers -------------------------------------------------------------------------------------------


class ServerViewSet(TenantScopedViewSet):
    """MCP servers of the tenant, by name. Viewers read (never a secret: header and variable names
    only, ``has_api_key``); admins register (``transport`` stdio with ``command``/``args``/``env``, or
    sse / streamable-http with ``url`` and ``headers``), change any field but the name, and delete.
    An invalid registration is 400 with every problem by field (stdio command allowlist, no shell
    metacharacters or inline-code flags, allowed ``env:`` references, the SSRF guard on URLs, size
    bounds); a name or tool prefix in use is 409."""

    model = MCPServer
    serializer_class = s.ServerOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return queryset.order_by("name", "id")

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ServerOutput(page, many=True).data)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(s.ServerOutput(access_server(actor=self.actor, name=name)).data)

    @extend_schema(request=s.ServerCreateInput, responses={201: s.ServerOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.ServerCreateInput, request)
        server = services.server_create(
            actor=self.actor, name=data.pop("name"), transport=data.pop("transport"), **data
        )
        return Response(s.ServerOutput(server).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ServerUpdateInput, responses={200: s.ServerOutput})
    def partial_update(self, request: Request, name: str) -> Response:
        server = access_server(actor=self.actor, name=name)
        data = _body(s.ServerUpdateInput, request)
        server = services.server_update(actor=self.actor, server=server, **data)
        return Response(s.ServerOutput(server).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        server = access_server(actor=self.actor, name=name)
        services.server_delete(actor=self.actor, server=server)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServerScopedViewSet(TenantScopedViewSet):
    """A view of one server's objects: the server is resolved in the caller's tenant before anything
    else (after the role check), so another tenant's is 404 whatever the method."""

    server: MCPServer

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.server = access_server(actor=self.actor, name=kwargs["name"])

    def scope_queryset(self, queryset: Any) -> Any:
        if getattr(self, "server", None) is None:
            return queryset.none()
        return queryset.filter(server_id=self.server.pk)


class ServerConnectionViewSet(ServerScopedViewSet):
    """Connect to a server once with a fresh session and list its tools (admins): ``test`` only reports
    (``ok``, the tools, the error, the time taken); ``refresh`` also stores the tools found as the
    server's discovered tools and records its status. Both are audited. An unreachable server is 200
    with ``ok: false`` and the reason: the request itself succeeded."""

    model = MCPServerTool

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def test(self, request: Request, name: str) -> Response:
        return Response(services.server_connect(actor=self.actor, server=self.server, store=False))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def refresh(self, request: Request, name: str) -> Response:
        return Response(services.server_connect(actor=self.actor, server=self.server, store=True))


class ServerToolViewSet(ServerScopedViewSet):
    """The tools discovered on a server (viewers): each with its registered name (what agents call),
    description, input schema and when it was discovered."""

    model = MCPServerTool
    serializer_class = s.ServerToolOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).order_by("name", "id")

    def list(self, request: Request, name: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        data = s.ServerToolOutput(page, many=True, context={"server": self.server}).data
        return self.get_paginated_response(data)


class GrantListViewSet(ServerScopedViewSet):
    """Both kinds of grant of a server (admins): ``agent_grants`` (required for an agent to reach the
    server; its allow/deny filter the tools) and ``user_grants`` (narrow further; disabled, they veto
    the server for that user)."""

    model = AgentGrant
    serializer_class = s.GrantsOutput
    pagination_class = None
    list_returns_one_object = True
    read_role = Role.ADMIN

    @extend_schema(operation_id="mcp_servers_grants_list", responses={200: s.GrantsOutput})
    def list(self, request: Request, name: str) -> Response:
        tenant = self.actor.tenant
        agents = list(selectors.agent_grants(tenant=tenant, server=self.server))
        users = selectors.user_grants(tenant=tenant, server=self.server)
        effects = selectors.grant_effects(tenant=tenant, grants=agents)
        return Response(
            {
                "agent_grants": s.AgentGrantOutput(agents, many=True, context={"effects": effects}).data,
                "user_grants": s.UserGrantOutput(users, many=True).data,
            }
        )


class AgentGrantViewSet(ServerScopedViewSet):
    """One agent's grant of a server (admins). PUT creates (201) or replaces (200) the whole grant:
    ``enabled``, ``tool_allow`` (original tool names; null: every tool), ``tool_deny`` (beats allow),
    ``resources`` and ``prompts`` (the server's resources and prompts; default true),
    ``config_overrides``. DELETE removes it (the agent loses the server's tools)."""

    model = AgentGrant
    serializer_class = s.AgentGrantOutput
    read_role = Role.ADMIN

    def _agent(self, key: str) -> Agent:
        return access_agent(actor=self.actor, key=key)

    def retrieve(self, request: Request, name: str, key: str) -> Response:
        grant = access_agent_grant(actor=self.actor, server=self.server, agent_key=key)
        return Response(s.AgentGrantOutput(grant).data)

    @extend_schema(request=s.GrantInput, responses={200: s.AgentGrantOutput, 201: s.AgentGrantOutput})
    def update(self, request: Request, name: str, key: str) -> Response:
        agent = self._agent(key)
        data = _body(s.GrantInput, request)
        existed = (
            selectors.agent_grants(tenant=self.actor.tenant, server=self.server).filter(agent=agent).exists()
        )
        grant = services.agent_grant_set(actor=self.actor, server=self.server, agent=agent, **data)
        grant = access_agent_grant(actor=self.actor, server=self.server, agent_key=agent.key)
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        return Response(s.AgentGrantOutput(grant).data, status=code)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str, key: str) -> Response:
        grant = access_agent_grant(actor=self.actor, server=self.server, agent_key=key)
        services.grant_delete(actor=self.actor, grant=grant)
        return Response(status=status.HTTP_204_NO_CONTENT)


class UserGrantViewSet(ServerScopedViewSet):
    """One user's grant of a server (admins). PUT creates (201) or replaces (200) it, like an agent
    grant; a user grant never adds tools, it narrows the agent's (or, disabled, vetoes the server).
    DELETE removes it."""

    model = UserGrant
    serializer_class = s.UserGrantOutput
    read_role = Role.ADMIN

    def retrieve(self, request: Request, name: str, user_id: str) -> Response:
        grant = access_user_grant(actor=self.actor, server=self.server, user_id=user_id)
        return Response(s.UserGrantOutput(grant).data)

    @extend_schema(request=s.GrantInput, responses={200: s.UserGrantOutput, 201: s.UserGrantOutput})
    def update(self, request: Request, name: str, user_id: str) -> Response:
        data = _body(s.GrantInput, request)
        existed = (
            selectors.user_grants(tenant=self.actor.tenant, server=self.server)
            .filter(user_id=user_id)
            .exists()
        )
        grant = services.user_grant_set(actor=self.actor, server=self.server, user_id=user_id, **data)
        grant = access_user_grant(actor=self.actor, server=self.server, user_id=grant.user_id)
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        return Response(s.UserGrantOutput(grant).data, status=code)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str, user_id: str) -> Response:
        grant = access_user_grant(actor=self.actor, server=self.server, user_id=user_id)
        services.grant_delete(actor=self.actor, grant=grant)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CredentialViewSet(ServerScopedViewSet):
    """Users' own credentials for a server (admins), write-only: the list and every answer say which
    are set (``has_api_key``, header and variable names), never their values. PUT sets ``api_key``,
    ``headers`` and/or ``env`` (stdio servers) for one user; a field left out keeps its value, an empty
    one clears it (201 when new, 200 otherwise). DELETE removes them."""

    model = UserCredential
    serializer_class = s.CredentialOutput
    read_role = Role.ADMIN

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).select_related("server").order_by("user_id", "id")

    def list(self, request: Request, name: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.CredentialOutput(page, many=True).data)

    @extend_schema(request=s.CredentialInput, responses={200: s.CredentialOutput, 201: s.CredentialOutput})
    def update(self, request: Request, name: str, user_id: str) -> Response:
        data = _body(s.CredentialInput, request)
        existed = selectors.credential_list(tenant=self.actor.tenant, server=self.server).filter(
            user_id=user_id
        )
        code = status.HTTP_200_OK if existed.exists() else status.HTTP_201_CREATED
        credential = services.credential_set(actor=self.actor, server=self.server, user_id=user_id, **data)
        credential = access_credential(actor=self.actor, server=self.server, user_id=credential.user_id)
        return Response(s.CredentialOutput(credential).data, status=code)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str, user_id: str) -> Response:
        credential = access_credential(actor=self.actor, server=self.server, user_id=user_id)
        services.credential_delete(actor=self.actor, credential=credential)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentMCPGrantViewSet(TenantScopedViewSet):
    """Every MCP grant one agent holds, by server (admins)."""

    model = AgentGrant
    serializer_class = s.AgentGrantOutput
    pagination_class = None
    read_role = Role.ADMIN

    def list(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        grants = list(selectors.agent_grants_of(tenant=self.actor.tenant, agent_id=agent.pk))
        effects = selectors.grant_effects(tenant=self.actor.tenant, grants=grants)
        return Response(s.AgentGrantOutput(grants, many=True, context={"effects": effects}).data)


# --- access requests ------------------------------------------------------------------------------------


class RequestViewSet(TenantScopedViewSet):
    """Access requests. Members (and up) ask: ``{server, scope: agent|user, agent?, user_id?,
    tool_allow?, reason}``; the request is pending and arrives live on the administrators' ``mcp``
    topic. The list (newest first, cursor pagination; filters ``status``, ``server``, ``scope``) and one
    request are every request of the tenant for administrators and one's own requests for anyone else
    (someone else's is 404).

    Administrators decide: ``approve`` (optional ``note``, and ``tool_allow`` to grant fewer tools than
    were asked for, never others) creates or updates the grant in the same transaction; ``reject``
    (a ``note`` saying why is required: 400 without one) grants nothing. Deciding a request that is
    decided already is **409** (a missing one, or another tenant's, 404) and changes nothing. The
    requester is told live on their ``me`` topic (``mcp.request.approved`` / ``mcp.request.rejected``,
    with the note)."""

    model = AccessRequest
    serializer_class = s.RequestOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.VIEWER
    write_role = Role.ADMIN
    action_roles = {"create": Role.MEMBER}
    target_request: AccessRequest

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        return selectors.request_list(actor=self.actor, **_filters(s.RequestFilterInput, self.request))

    @extend_schema(parameters=[s.RequestFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.RequestOutput(page, many=True).data)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # One request's routes find it before the method is dispatched: someone else's is 404 for
        # every method.
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.target_request = access_request(actor=self.actor, id=kwargs["pk"])

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.RequestOutput(self.target_request).data)

    @extend_schema(request=s.RequestCreateInput, responses={201: s.RequestOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.RequestCreateInput, request)
        actor = self.actor
        server = selectors.server_list(tenant=actor.tenant).filter(name=data["server"]).first()
        if server is None:
            raise ServiceError(
                ErrorCode.INVALID,
                "server: no MCP server of this name in this tenant.",
                details={"server": ["Unknown server."]},
            )
        agent: Agent | None = None
        if data["scope"] == AccessRequest.Scope.AGENT:
            key = data.get("agent")
            agent = agent_list(tenant=actor.tenant).filter(key=key).first() if key else None
            if agent is None:
                message = (
                    f"no agent {key[:64]!r} in this tenant."
                    if key
                    else "an agent-scoped request names the agent."
                )
                raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
        user_id = data.get("user_id")
        if user_id is None:
            user_id = actor.label if actor.kind == "user" else ""
        req = services.request_create(
            actor=actor,
            server=server,
            scope=data["scope"],
            agent=agent,
            user_id=user_id if data["scope"] == AccessRequest.Scope.USER else "",
            tool_allow=data["tool_allow"],
            reason=data["reason"],
        )
        return Response(s.RequestOutput(access_request(actor=actor, id=req.pk)).data, status=201)

    @extend_schema(request=s.ApproveInput, responses={200: s.RequestOutput})
    def approve(self, request: Request, pk: str) -> Response:
        req = self.target_request
        data = _body(s.ApproveInput, request)
        services.request_review(
            actor=self.actor,
            request_id=req.pk,
            approved=True,
            note=data["note"],
            tool_allow=data["tool_allow"],
        )
        return Response(s.RequestOutput(access_request(actor=self.actor, id=req.pk)).data)

    @extend_schema(request=s.RejectInput, responses={200: s.RequestOutput})
    def reject(self, request: Request, pk: str) -> Response:
        req = self.target_request
        data = _body(s.RejectInput, request)
        services.request_review(actor=self.actor, request_id=req.pk, approved=False, note=data["note"])
        return Response(s.RequestOutput(access_request(actor=self.actor, id=req.pk)).data)
