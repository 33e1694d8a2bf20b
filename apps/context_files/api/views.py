"""The context files API: an agent's seven files (its own text; for per-user files, the template users
start from) and the copies its users have.

Viewers read; administrators set and delete. Every write goes through ``apps.context_files.services``
(audited, published on the ``context_files`` topic). The agent is found inside the caller's tenant:
another tenant's agent is 404 whatever the method. A name that is not one of the seven is 404 with the
valid names in the message.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.context_files import selectors, services
from apps.context_files.api import serializers as s
from apps.context_files.entries import agent_entry, user_entry
from apps.context_files.models import NAMES, UserContextFile
from apps.tenants.access import access_agent
from apps.tenants.api.base import TenantViewMixin
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent

NAME = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, enum=list(NAMES), description="The context file."
)


def _user_id(value: str) -> str:
    try:
        return services.check_user_id(value)
    except ServiceError:
        raise ServiceError(ErrorCode.NOT_FOUND, "No such user id.", status=404) from None


def _no_copy(user_id: str, name: str) -> ServiceError:
    return ServiceError(ErrorCode.NOT_FOUND, f"the user {user_id[:100]!r} has no copy of {name}.", status=404)


class AgentFilesView(TenantViewMixin, APIView):
    """The seven context files of an agent, in a fixed order, with its text (``content`` null when it
    has none) and how its tools reach each one."""

    @extend_schema(operation_id="agents_context_files_list", responses={200: s.AgentFilesOutput})
    def get(self, request: Request, key: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        rows = selectors.agent_files(tenant=self.actor.tenant, agent=agent)
        files = [agent_entry(agent, name, rows.get(name)) for name in NAMES]
        return Response(s.AgentFilesOutput({"agent": agent.key, "type": agent.type, "files": files}).data)


@extend_schema_view(
    get=extend_schema(parameters=[NAME]),
    put=extend_schema(parameters=[NAME]),
    delete=extend_schema(parameters=[NAME]),
)
class AgentFileView(TenantViewMixin, APIView):
    """One file of an agent: read it, set it (``{"content": "…"}``, at most 256 KiB), delete it."""

    def _target(self, key: str, name: str) -> Agent:
        agent = access_agent(actor=self.actor, key=key)
        selectors.known_name(name)
        return agent

    @extend_schema(responses={200: s.AgentFileOutput})
    def get(self, request: Request, key: str, name: str) -> Response:
        agent = self._target(key, name)
        row = selectors.agent_file(tenant=self.actor.tenant, agent=agent, name=name)
        return Response(s.AgentFileOutput(agent_entry(agent, name, row)).data)

    @extend_schema(request=s.ContextFileInput, responses={200: s.AgentFileOutput})
    def put(self, request: Request, key: str, name: str) -> Response:
        agent = self._target(key, name)
        data = s.ContextFileInput(data=request.data)
        data.is_valid(raise_exception=True)
        row = services.agent_file_save(
            actor=self.actor, agent=agent, name=name, content=data.validated_data["content"], via="api"
        )
        return Response(s.AgentFileOutput(agent_entry(agent, name, row)).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, key: str, name: str) -> Response:
        agent = self._target(key, name)
        services.agent_file_delete(actor=self.actor, agent=agent, name=name, via="api")
        return Response(status=status.HTTP_204_NO_CONTENT)


class UserFilesView(TenantViewMixin, APIView):
    """The copies one user of the agent has (only the files they have a copy of)."""

    @extend_schema(operation_id="agents_context_files_users_list", responses={200: s.UserFilesOutput})
    def get(self, request: Request, key: str, user_id: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        user_id = _user_id(user_id)
        rows = selectors.user_files(tenant=self.actor.tenant, agent=agent, user_id=user_id)
        files = [user_entry(rows[name]) for name in NAMES if name in rows]
        return Response(s.UserFilesOutput({"agent": agent.key, "user_id": user_id, "files": files}).data)


class BootstrapView(TenantViewMixin, APIView):
    """A user's first run with the agent: whether it is complete (the agent wrote BOOTSTRAP.md empty for
    them) and whether they still read a BOOTSTRAP.md. DELETE forgets the completion: the user reads the
    agent's BOOTSTRAP.md again."""

    @extend_schema(responses={200: s.BootstrapOutput})
    def get(self, request: Request, key: str, user_id: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        user_id = _user_id(user_id)
        tenant = self.actor.tenant
        completion = selectors.bootstrap_completion(tenant=tenant, agent=agent, user_id=user_id)
        output = {
            "agent": agent.key,
            "user_id": user_id,
            "completed_at": completion.updated_at if completion is not None else None,
            "pending": selectors.bootstrap_pending(tenant=tenant, agent=agent, user_id=user_id),
        }
        return Response(s.BootstrapOutput(output).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, key: str, user_id: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        user_id = _user_id(user_id)
        if not services.bootstrap_reset(actor=self.actor, agent=agent, user_id=user_id, via="api"):
            raise ServiceError(
                ErrorCode.NOT_FOUND,
                f"the user {user_id[:100]!r} has no completed first run to reset.",
                status=404,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(get=extend_schema(parameters=[NAME]), delete=extend_schema(parameters=[NAME]))
class UserFileView(TenantViewMixin, APIView):
    """One user's copy of a file: read it, or delete it (the user then reads the agent's text again)."""

    def _row(self, key: str, user_id: str, name: str) -> tuple[Agent, UserContextFile | None]:
        agent = access_agent(actor=self.actor, key=key)
        selectors.known_name(name)
        row = selectors.user_file(tenant=self.actor.tenant, agent=agent, user_id=_user_id(user_id), name=name)
        return agent, row

    @extend_schema(responses={200: s.UserFileOutput})
    def get(self, request: Request, key: str, user_id: str, name: str) -> Response:
        _, row = self._row(key, user_id, name)
        if row is None:
            raise _no_copy(user_id, name)
        return Response(s.UserFileOutput(user_entry(row)).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, key: str, user_id: str, name: str) -> Response:
        agent = access_agent(actor=self.actor, key=key)
        selectors.known_name(name)
        user_id = _user_id(user_id)
        if not services.user_file_delete(
            actor=self.actor, agent=agent, user_id=user_id, name=name, via="api"
        ):
            raise ServiceError(
                ErrorCode.NOT_FOUND, f"the user {user_id[:100]!r} has no copy of {name}.", status=404
            )
        return Response(status=status.HTTP_204_NO_CONTENT)
