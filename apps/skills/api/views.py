"""The skills API: a tenant's skills (global or one agent's), their files and uses, and the skill
context an agent loop asks for once per turn.

Viewers read skills, files and uses; administrators add, change and delete skills. Every write goes
through ``apps.skills.services`` (audited, published on the ``skills`` topic). Another tenant's skill or
agent is 404 whatever the method. ``POST agents/<key>/skills/context`` needs the member role, like
``runtime/execute``: agent loops call it with their member keys.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.skills import loading, selectors, services
from apps.skills.access import access_skill
from apps.skills.api import serializers as s
from apps.skills.models import Skill, SkillUse
from apps.tenants.access import access_runtime_agent
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet, TenantViewMixin
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

FIELDS = ("name", "description", "triggers", "body")


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


def _agent(actor: Any, key: str | None) -> Agent | None:
    """The tenant's agent with this key (None for None); an unknown key is 400 on ``agent``."""
    if key is None:
        return None
    agent = agent_list(tenant=actor.tenant).filter(key=key).first()
    if agent is None:
        message = f"no agent {key[:64]!r} in this tenant."
        raise ServiceError(ErrorCode.INVALID, f"agent: {message}", details={"agent": [message]})
    return agent


class SkillViewSet(TenantScopedViewSet):
    """Skills of the tenant. A skill is global (``agent`` null: every agent has it) or one agent's
    (``agent``: its key); an agent's own skill shadows a global one of the same name. A skill is its
    SKILL.md: YAML frontmatter with ``name`` (lower-case letters, digits and ``-``, at most 64),
    ``description`` (at most 1024 characters) and ``triggers`` (phrases that activate it when a user's
    message contains one; at most 20), then the Markdown instructions.

    ``GET skills/``: ``?agent=<key>`` one agent's own skills, ``?agent=global`` the global ones, ``?q=``
    in the name, description or triggers, ``?enabled=``; paginated, without content.
    ``POST skills/``: ``{content, agent?, enabled?}``, or the fields ``{name, description, triggers?,
    body?, agent?, enabled?}`` instead of ``content``. ``PUT skills/<id>/``: the whole SKILL.md
    (``{content, enabled?}``). ``PATCH``: any of ``name``, ``description``, ``triggers``, ``body``
    (other frontmatter keys are kept), ``content``, ``enabled``, ``agent``. Every change of the content
    raises ``version``. An invalid SKILL.md is 400 by field; a name in use in the same scope is 409."""

    model = Skill
    serializer_class = s.SkillOutput
    skill: Skill

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # One skill's routes find it before the method is dispatched: another tenant's is 404 for every
        # method, an unsupported one included.
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.skill = access_skill(tenant=self.actor.tenant, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        filters = s.SkillFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        key = params.get("agent")
        return selectors.skill_list(
            tenant=self.actor.tenant,
            agent=_agent(self.actor, key) if key and key != selectors.GLOBAL else None,
            only_global=key == selectors.GLOBAL,
            query=params.get("q", ""),
            enabled=params.get("enabled"),
        )

    def _detail(self) -> dict[str, Any]:
        skill = access_skill(tenant=self.actor.tenant, id=self.skill.pk)
        return dict(s.SkillDetailOutput(skill).data)

    @extend_schema(parameters=[s.SkillFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SkillOutput(page, many=True).data)

    @extend_schema(responses={200: s.SkillDetailOutput})
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.SkillDetailOutput(self.skill).data)

    @extend_schema(request=s.SkillFieldsInput, responses={201: s.SkillDetailOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.SkillFieldsInput, request)
        given = [name for name in FIELDS if name in data]
        if "content" in data and given:
            message = f"give content (the whole SKILL.md) or the fields {', '.join(given)}, not both."
            raise ServiceError(ErrorCode.INVALID, f"content: {message}", details={"content": [message]})
        content = data.get("content")
        if content is None:
            content = services.compose(
                name=data.get("name"),
                description=data.get("description"),
                triggers=data.get("triggers"),
                body=data.get("body", ""),
            )
        self.skill = services.skill_create(
            actor=self.actor,
            content=content,
            agent=_agent(self.actor, data.get("agent")),
            enabled=data.get("enabled", True),
            source=Skill.Source.API,
        )
        return Response(self._detail(), status=status.HTTP_201_CREATED)

    @extend_schema(request=s.SkillReplaceInput, responses={200: s.SkillDetailOutput})
    def update(self, request: Request, pk: str) -> Response:
        data = _body(s.SkillReplaceInput, request)
        services.skill_update(
            actor=self.actor, skill=self.skill, content=data["content"], enabled=data.get("enabled")
        )
        return Response(self._detail())

    @extend_schema(request=s.SkillFieldsInput, responses={200: s.SkillDetailOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        data = _body(s.SkillFieldsInput, request)
        changes: dict[str, Any] = {
            name: data[name] for name in (*FIELDS, "content", "enabled") if name in data
        }
        if "agent" in data:
            changes["agent"] = _agent(self.actor, data["agent"])
        services.skill_update(actor=self.actor, skill=self.skill, **changes)
        return Response(self._detail())

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.skill_delete(actor=self.actor, skill=self.skill)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: s.SkillFileOutput(many=True)})
    def files(self, request: Request, pk: str) -> Response:
        rows = selectors.skill_files(tenant=self.actor.tenant, skill=self.skill)
        return Response(
            [{"path": row.path, "size": len(row.content), "content": row.content} for row in rows]
        )


class SkillUseViewSet(TenantScopedViewSet):
    """``GET skills/uses/``: who used which skill and how (``manual``: use_skill; ``auto``: a trigger in
    the user's message), newest first; ``?skill=<id>``, ``?agent=<key>``; paginated."""

    model = SkillUse
    serializer_class = s.SkillUseOutput

    def scope_queryset(self, queryset: Any) -> Any:
        filters = s.SkillUseFilterInput(data=self.request.query_params.dict())
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        return selectors.use_list(
            tenant=self.actor.tenant,
            skill_id=params.get("skill"),
            agent=_agent(self.actor, params.get("agent")),
        )

    @extend_schema(parameters=[s.SkillUseFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.SkillUseOutput(page, many=True).data)


class SkillContextView(TenantViewMixin, APIView):
    """The skills of one conversation at this turn, for the agent loop's system prompt (the loading
    rules of ``apps.skills.loading``): what use_skill activated, the skills whose triggers ``message``
    contains (activated as auto, and answered as ``hints``), expired ones dropped, at most 4 active and
    their bodies within the 16,000-character budget (a skill over it is listed with ``content`` null
    and a ``truncated_reason``)."""

    write_role = Role.MEMBER
    agent: Agent

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.agent = access_runtime_agent(actor=self.actor, key=kwargs["key"])

    @extend_schema(request=s.SkillContextInput, responses={200: s.SkillContextOutput})
    def post(self, request: Request, key: str) -> Response:
        data = _body(s.SkillContextInput, request)
        context = loading.skill_context(
            actor=self.actor,
            agent=self.agent,
            user_id=data["user_id"],
            session_key=data["session_key"],
            turn=data["turn"],
            message=data["message"],
        )
        return Response(context.as_dict())
