"""The teams API: teams and their members, settings and user grants (admins); the task board — list,
search, detail and every human action (members); escalations and the task event trail (viewers read).

Every route under ``teams/<id>/`` resolves the team inside the caller's tenant first, so another
tenant's team (or a task of another team) is 404 whatever the method. Task actions go through the
board's state machine (``apps.teams.board``, by way of the audited services of ``apps.teams.services``)
as the human ``<email>`` or ``api-key:<prefix>``; a refusal
keeps the board's message: 409 for a task in the wrong state, 400 for invalid input, 404 for a task
not on this board.

A team with user grants is restricted for users below admin (``apps.teams.visibility``): without a grant it
is missing (absent from the list, 404 below it), and acting on its tasks or escalations needs an
operator grant (403 otherwise).
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from apps.teams import selectors, services
from apps.teams.access import access_grant, access_member, access_team
from apps.teams.api import serializers as s
from apps.teams.api.pagination import TaskPagination
from apps.teams.board import BoardError
from apps.teams.models import Escalation, Task, TaskEvent, Team, TeamMember, TeamUserGrant
from apps.teams.visibility import require_act, team_visibility
from apps.tenants.actors import Actor
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role

_BOARD_STATUS = {"conflict": 409, "invalid": 400, "not_found": 404, "forbidden": 403}
_BOARD_CODE = {
    "conflict": ErrorCode.CONFLICT,
    "invalid": ErrorCode.INVALID,
    "not_found": ErrorCode.NOT_FOUND,
    "forbidden": ErrorCode.PERMISSION_DENIED,
}


def _filters(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.query_params.dict())
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


def agent_named(*, actor: Actor, field: str, key: str) -> Agent:
    """The tenant's agent ``key`` named in a request body: a missing one (or another tenant's) is an
    invalid input naming the field."""
    agent = selectors.agent_get(tenant=actor.tenant, key=key)
    if agent is None:
        raise ServiceError(
            ErrorCode.INVALID,
            f"{field}: no agent {key[:64]!r} in this tenant.",
            details={field: ["Unknown agent."]},
        )
    return agent


def _members_prefetch(view: TenantScopedViewSet) -> Prefetch:  # type: ignore[type-arg]
    return Prefetch("members", queryset=selectors.members(tenant=view.actor.tenant))


class TeamViewSet(TenantScopedViewSet):
    """Teams of the tenant with their lead and members. Viewers read; admins create, rename, change the
    settings (the blocker-escalation toggle among them) and archive (DELETE; the board stays readable)."""

    model = Team
    serializer_class = s.TeamOutput

    def scope_queryset(self, queryset: Any) -> Any:
        queryset = queryset.filter(team_visibility(self.actor))
        queryset = queryset.select_related("lead").prefetch_related(_members_prefetch(self))
        if self.action == "list":
            wanted = _filters(s.TeamFilterInput, self.request).get("status")
            if wanted:
                queryset = queryset.filter(status=wanted)
        return queryset.order_by("name", "id")

    def _output(self, team: Team) -> dict[str, Any]:
        return dict(s.TeamOutput(self.get_queryset().get(pk=team.pk)).data)

    @extend_schema(parameters=[s.TeamFilterInput])
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.TeamOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.TeamOutput(self.get_object()).data)

    @extend_schema(request=s.TeamCreateInput, responses={201: s.TeamOutput})
    def create(self, request: Request) -> Response:
        data = _body(s.TeamCreateInput, request)
        lead = agent_named(actor=self.actor, field="lead", key=data["lead"])
        members = [agent_named(actor=self.actor, field="members", key=key) for key in data["members"]]
        team = services.team_create(
            actor=self.actor,
            name=data["name"],
            lead=lead,
            members=members,
            description=data["description"],
            settings=data["settings"],
        )
        return Response(self._output(team), status=status.HTTP_201_CREATED)

    @extend_schema(request=s.TeamUpdateInput, responses={200: s.TeamOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        team = access_team(actor=self.actor, id=pk)
        data = _body(s.TeamUpdateInput, request)
        team = services.team_update(actor=self.actor, team=team, **data)
        return Response(self._output(team))

    @extend_schema(request=None, responses={200: s.TeamOutput})
    def destroy(self, request: Request, pk: str) -> Response:
        team = access_team(actor=self.actor, id=pk)
        team = services.team_archive(actor=self.actor, team=team)
        return Response(self._output(team))


class TeamScopedViewSet(TenantScopedViewSet):
    """A view of one team's objects: the team is resolved in the caller's tenant before anything else
    (404 for another tenant's), and board refusals become the error envelope."""

    team: Team
    acts_on_board = False  # writes here act on the team's tasks or escalations (operators' grants)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.team = access_team(actor=self.actor, id=kwargs["pk"])
        if self.acts_on_board and request.method not in SAFE_METHODS:
            require_act(actor=self.actor, team=self.team)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, BoardError):
            exc = ServiceError(
                _BOARD_CODE.get(exc.code, ErrorCode.CONFLICT),
                exc.message,
                status=_BOARD_STATUS.get(exc.code, 409),
            )
        elif isinstance(exc, selectors.SelectorError):
            exc = ServiceError(ErrorCode.INVALID, str(exc))
        return super().handle_exception(exc)

    def scope_queryset(self, queryset: Any) -> Any:
        if getattr(self, "team", None) is None:
            return queryset.none()
        return queryset.filter(team_id=self.team.pk)


class TeamMemberViewSet(TeamScopedViewSet):
    """A team's members (viewers read; admins add and remove; the lead stays)."""

    model = TeamMember
    serializer_class = s.TeamMemberOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).select_related("agent").order_by("created_at", "id")

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.TeamMemberOutput(page, many=True).data)

    @extend_schema(request=s.MemberAddInput, responses={201: s.TeamMemberOutput})
    def create(self, request: Request, pk: str) -> Response:
        data = _body(s.MemberAddInput, request)
        member = services.member_add(
            actor=self.actor,
            team=self.team,
            agent=agent_named(actor=self.actor, field="agent", key=data["agent"]),
        )
        member = self.get_queryset().get(pk=member.pk)
        return Response(s.TeamMemberOutput(member).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str, key: str) -> Response:
        agent = access_member(actor=self.actor, team=self.team, key=key)
        services.member_remove(actor=self.actor, team=self.team, agent=agent)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(parameters=[s.TaskFilterInput], responses={200: s.TaskListOutput(many=True)}),
)
class TaskViewSet(TeamScopedViewSet):
    """A team's task board. Viewers read (list with filters, search and paging; a task with its
    comments, events and attachments); members create, change and act on tasks. Only completed, failed
    or cancelled tasks can be deleted (their events stay)."""

    model = Task
    serializer_class = s.TaskOutput
    pagination_class = TaskPagination
    write_role = Role.MEMBER
    acts_on_board = True

    def scope_queryset(self, queryset: Any) -> Any:
        queryset = super().scope_queryset(queryset).select_related("owner", "created_by_agent")
        if self.action != "list":
            return queryset
        filters = _filters(s.TaskFilterInput, self.request)
        if filters.get("status"):
            queryset = queryset.filter(status__in=filters["status"])
        if "owner" in filters:
            queryset = queryset.filter(owner__key=filters["owner"])
        if "chat_id" in filters:
            queryset = queryset.filter(chat_id=filters["chat_id"])
        if "task_type" in filters:
            queryset = queryset.filter(task_type=filters["task_type"])
        queryset = queryset.order_by("-priority", "created_at", "id")
        if filters.get("q"):
            terms = selectors.search_terms(filters["q"])
            if not terms:
                raise ServiceError(ErrorCode.INVALID, "q: no searchable words (letters or digits).")
            query = SearchQuery(terms, search_type="raw", config="simple")
            queryset = (
                queryset.filter(search_vector=query)
                .annotate(rank=SearchRank(F("search_vector"), query))
                .order_by("-rank", "-priority", "created_at", "id")
            )
        return queryset

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.TaskListOutput(page, many=True).data)

    @extend_schema(responses={200: s.TaskDetailOutput})
    def retrieve(self, request: Request, pk: str, task_id: str) -> Response:
        detail = selectors.task_detail(team=self.team, task_id=task_id)
        if detail is None:
            raise ServiceError(ErrorCode.NOT_FOUND, "task not found on this team's board", status=404)
        return Response(s.TaskDetailOutput(detail).data)

    def _task(self, task: Task) -> Response:
        fresh = selectors.task_get(team=self.team, task_id=task.pk)
        return Response(s.TaskOutput(fresh).data)

    @extend_schema(request=s.TaskCreateInput, responses={201: s.TaskOutput})
    def create(self, request: Request, pk: str) -> Response:
        data = _body(s.TaskCreateInput, request)
        owner_key = data.pop("owner")
        owner = None if owner_key is None else agent_named(actor=self.actor, field="owner", key=owner_key)
        task = services.task_create(actor=self.actor, team=self.team, owner=owner, **data)
        response = self._task(task)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=s.TaskUpdateInput, responses={200: s.TaskOutput})
    def partial_update(self, request: Request, pk: str, task_id: str) -> Response:
        data = _body(s.TaskUpdateInput, request)
        return self._task(services.task_update(actor=self.actor, team=self.team, task_id=task_id, **data))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str, task_id: str) -> Response:
        services.task_delete(actor=self.actor, team=self.team, task_id=task_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.AssignInput, responses={200: s.TaskOutput})
    def assign(self, request: Request, pk: str, task_id: str) -> Response:
        """A pending task goes to a member, in progress, and is dispatched to it."""
        agent = agent_named(actor=self.actor, field="agent", key=_body(s.AssignInput, request)["agent"])
        task = services.task_assign(actor=self.actor, team=self.team, task_id=task_id, agent=agent)
        return self._task(task)

    @extend_schema(request=s.ReasonInput, responses={200: s.TaskOutput})
    def cancel(self, request: Request, pk: str, task_id: str) -> Response:
        """Any task not completed or cancelled is cancelled; its dependents are unblocked."""
        reason = _body(s.ReasonInput, request)["reason"] or "Cancelled by user"
        task = services.task_cancel(actor=self.actor, team=self.team, task_id=task_id, reason=reason)
        return self._task(task)

    @extend_schema(request=s.RetryInput, responses={200: s.TaskOutput})
    def retry(self, request: Request, pk: str, task_id: str) -> Response:
        """A stale, failed, cancelled, in-review or completed task is reopened and dispatched to its
        owner again with the reason and the new ``instructions`` (at most 4000 characters, in the
        dispatch's message and kept as a comment; without an owner it waits, pending, for any member to
        claim it); its open escalations count as retried."""
        body = _body(s.RetryInput, request)
        task = services.task_retry(
            actor=self.actor,
            team=self.team,
            task_id=task_id,
            note=body["reason"],
            instructions=body["instructions"],
        )
        return self._task(task)

    @extend_schema(request=None, responses={200: s.TaskOutput})
    def approve(self, request: Request, pk: str, task_id: str) -> Response:
        """Reviewed work is completed; a task waiting for approval before it ran becomes pending (and
        goes to its owner at once). A comment records the approval."""
        return self._task(services.task_approve(actor=self.actor, team=self.team, task_id=task_id))

    @extend_schema(request=s.ReasonInput, responses={200: s.TaskOutput})
    def reject(self, request: Request, pk: str, task_id: str) -> Response:
        """Work in review with an owner goes back to that owner with the reason as feedback; without
        an owner the task is cancelled (its dependents unblocked). A comment records the rejection."""
        reason = _body(s.ReasonInput, request)["reason"] or "Rejected by user"
        task = services.task_reject(actor=self.actor, team=self.team, task_id=task_id, reason=reason)
        return self._task(task)

    @extend_schema(request=s.CommentInput, responses={201: s.CommentedOutput})
    def comment(self, request: Request, pk: str, task_id: str) -> Response:
        """A note, or a blocker: a blocker on an in-progress task fails it and escalates to the lead
        (unless the team turned escalation off)."""
        data = _body(s.CommentInput, request)
        done = services.task_comment(
            actor=self.actor, team=self.team, task_id=task_id, text=data["text"], kind=data["type"]
        )
        body = {
            "comment": done.comment,
            "task": selectors.task_get(team=self.team, task_id=done.task.pk),
            "failed": done.failed,
            "escalation": done.escalation,
            "message": done.message,
        }
        return Response(s.CommentedOutput(body).data, status=status.HTTP_201_CREATED)


@extend_schema_view(list=extend_schema(parameters=[s.EscalationFilterInput]))
class EscalationViewSet(TeamScopedViewSet):
    """Blocked members escalated to the lead, newest first (viewers read; members resolve)."""

    model = Escalation
    serializer_class = s.EscalationOutput
    pagination_class = CreatedCursorPagination
    write_role = Role.MEMBER
    acts_on_board = True

    def scope_queryset(self, queryset: Any) -> Any:
        queryset = super().scope_queryset(queryset).select_related("task", "task__owner", "member")
        if self.action == "list":
            wanted = _filters(s.EscalationFilterInput, self.request).get("state")
            if wanted:
                queryset = queryset.filter(state=wanted)
        return queryset

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.EscalationOutput(page, many=True).data)

    @extend_schema(request=None, responses={200: s.EscalationOutput})
    def resolve(self, request: Request, pk: str, escalation_id: str) -> Response:
        """Mark the escalation resolved (409 when it already is)."""
        services.escalation_resolve(actor=self.actor, team=self.team, escalation_id=escalation_id)
        return Response(s.EscalationOutput(self.get_queryset().get(pk=escalation_id)).data)


@extend_schema_view(list=extend_schema(parameters=[s.TaskEventFilterInput]))
class TaskEventViewSet(TeamScopedViewSet):
    """The team's task event trail, newest first (cursor-paginated). Filters: ``task``, ``event_type``,
    ``since`` (inclusive), ``until`` (exclusive). Events of deleted tasks stay, with their identifier."""

    model = TaskEvent
    serializer_class = s.TaskEventOutput
    pagination_class = CreatedCursorPagination

    def scope_queryset(self, queryset: Any) -> Any:
        queryset = super().scope_queryset(queryset)
        filters = _filters(s.TaskEventFilterInput, self.request)
        if "task" in filters:
            queryset = queryset.filter(task_id=filters["task"])
        if "event_type" in filters:
            queryset = queryset.filter(event_type=filters["event_type"])
        if "since" in filters:
            queryset = queryset.filter(created_at__gte=filters["since"])
        if "until" in filters:
            queryset = queryset.filter(created_at__lt=filters["until"])
        return queryset

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.TaskEventOutput(page, many=True).data)


class TeamGrantViewSet(TeamScopedViewSet):
    """Humans granted a team's board (viewers read; admins grant and withdraw)."""

    model = TeamUserGrant
    serializer_class = s.GrantOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return super().scope_queryset(queryset).order_by("created_at", "id")

    def list(self, request: Request, pk: str) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.GrantOutput(page, many=True).data)

    @extend_schema(request=s.GrantCreateInput, responses={201: s.GrantOutput})
    def create(self, request: Request, pk: str) -> Response:
        data = _body(s.GrantCreateInput, request)
        grant = services.grant_create(actor=self.actor, team=self.team, **data)
        return Response(s.GrantOutput(grant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str, grant_id: str) -> Response:
        grant = access_grant(actor=self.actor, team=self.team, id=grant_id)
        services.grant_delete(actor=self.actor, team=self.team, grant=grant)
        return Response(status=status.HTTP_204_NO_CONTENT)
