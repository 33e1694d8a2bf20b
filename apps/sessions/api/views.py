"""The sessions API: an agent's conversations and their messages.

Members read sessions and write to them (agent loops record their conversations with a member key:
open a session, add messages); administrators rename, archive and delete them. Every write goes through
``apps.sessions.services`` (published on the ``sessions`` topic; audited). Another tenant's session is
404 whatever the method.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.sessions import selectors, services
from apps.sessions.access import access_session
from apps.sessions.api import serializers as s
from apps.sessions.models import Session
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class SessionViewSet(TenantScopedViewSet):
    """``GET sessions/`` (filters ``agent``, ``user_id``, ``status``, ``q`` in the key or label; most
    recently active first; paginated) and ``POST sessions/`` (open the agent's session under ``key``:
    201 when created, 200 with the existing one). ``GET|PATCH|DELETE sessions/<id>/``: one session;
    PATCH sets ``label`` or ``status`` (active, archived). ``GET sessions/<id>/messages/?after=&limit=``:
    the messages after a ``seq``, in order; ``POST`` adds one (``role`` user, assistant, tool or system;
    an archived session is 409)."""

    model = Session
    serializer_class = s.SessionOutput
    read_role = Role.MEMBER
    write_role = Role.ADMIN
    action_roles = {"create": Role.MEMBER, "messages": Role.MEMBER}
    session: Session

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.session = access_session(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        filters = s.SessionFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        return selectors.session_list(
            tenant=self.actor.tenant,
            agent=self._agent(params["agent"]) if params.get("agent") else None,
            user_id=params.get("user_id"),
            status=params.get("status"),
            query=params.get("q", ""),
        )

    def _agent(self, key: str) -> Agent:
        agent = agent_list(tenant=self.actor.tenant).filter(key=key).first()
        if agent is None:
            message = f"no agent {key[:64]!r} in this tenant."
            raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
        return agent

    @extend_schema(parameters=[s.SessionFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SessionOutput(page, many=True).data)

    @extend_schema(request=s.SessionCreateInput, responses={200: s.SessionOutput, 201: s.SessionOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.SessionCreateInput, request)
        data["agent"] = self._agent(data["agent"])
        session, created = services.session_open(actor=self.actor, **data)
        answer = s.SessionOutput(access_session(actor=self.actor, id=session.pk)).data
        return Response(answer, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.SessionOutput(self.session).data)

    @extend_schema(request=s.SessionUpdateInput, responses={200: s.SessionOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        data = _body(s.SessionUpdateInput, request)
        services.session_update(actor=self.actor, session=self.session, **data)
        return Response(s.SessionOutput(access_session(actor=self.actor, id=pk)).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.session_delete(actor=self.actor, session=self.session)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        methods=["GET"], parameters=[s.MessageFilterInput], request=None, responses={200: s.MessagePageOutput}
    )
    @extend_schema(methods=["POST"], request=s.MessageInput, responses={201: s.MessageOutput})
    def messages(self, request: Request, pk: str) -> Response:
        if request.method == "POST":
            data = _body(s.MessageInput, request)
            message = services.message_append(actor=self.actor, session=self.session, source="api", **data)
            return Response(s.MessageOutput(message).data, status=status.HTTP_201_CREATED)
        filters = s.MessageFilterInput(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        after, limit = filters.validated_data["after"], filters.validated_data["limit"]
        rows = selectors.messages(session=self.session, after=after, limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return Response(
            s.MessagePageOutput(
                {
                    "session": self.session.pk,
                    "message_count": self.session.message_count,
                    "messages": rows,
                    "next_after": rows[-1].seq if more else None,
                }
            ).data
        )
