"""Teams: the list and each team's settings and members (admins configure), the live task board, a
task's detail with the human actions on it (members act), the escalations inbox, and the team's audit
log of task events (viewers read).

Every team, task and escalation is found inside the tenant the page acts in: another tenant's (or
another team's) is 404 whatever the method, and so is a team the user's grants do not reach
(``apps.teams.visibility``); acting there without an operator grant is 403. Task actions go through
``apps.teams.services`` — the board's state machine as the human ``<email>``, audited — and a refusal
shows the board's message.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view, forbidden
from apps.dashboard.forms import (
    EscalationFilterForm,
    TaskAssignForm,
    TaskCommentForm,
    TaskCreateForm,
    TaskEventFilterForm,
    TaskReasonForm,
    TaskRetryForm,
    TeamCreateForm,
    TeamMemberAddForm,
    TeamSettingsForm,
    add_service_error,
)
from apps.dashboard.views.confirm import confirm_action
from apps.teams import board, selectors, services, visibility
from apps.teams.access import access_member, access_team
from apps.teams.board import BoardError
from apps.teams.models import Escalation, Task, Team
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

Status = Task.Status

# The board's columns, in the order a task usually moves through them.
COLUMNS = (
    Status.PENDING,
    Status.IN_PROGRESS,
    Status.IN_REVIEW,
    Status.BLOCKED,
    Status.COMPLETED,
    Status.FAILED,
    Status.CANCELLED,
    Status.STALE,
)
FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
COLUMN_CARDS = 50  # cards rendered per column; the header counts them all
MAX_CHATS = 200
PAGE_SIZE = 50
MAX_TEAMS_LIVE = 100  # team topics the tenant-wide escalations page follows
PLACEHOLDER = uuid.UUID(int=0)  # an item's id in URL templates the page's script fills in
TEAM_PLACEHOLDER = uuid.UUID(int=1)  # the team's, on pages that show several teams


# --- finding things -------------------------------------------------------------------------------------


def _team(request: DashboardRequest, id: uuid.UUID) -> Team:
    return access_team(actor=request.actor, id=id)


def _act_refusal(request: DashboardRequest, team: Team) -> HttpResponse | None:
    """The 403 page when the user's grant on the team does not let them act on its tasks."""
    refusal = visibility.act_refusal(request.actor, team)
    return None if refusal is None else forbidden(request, refusal)


def _task(team: Team, task_id: uuid.UUID) -> Task:
    task = selectors.task_get(team=team, task_id=task_id)
    if task is None:
        raise Http404("No task with this id on this team's board.")
    return task


def _task_action(
    view: Callable[[DashboardRequest, Team, Task], HttpResponse],
) -> Callable[[DashboardRequest, uuid.UUID, uuid.UUID], HttpResponse]:
    """A view acting on one task: the team is found (404 otherwise), the user's grant on it checked (the
    403 page), then the task (404); the view gets the team and the task."""

    @functools.wraps(view)
    def acting(request: DashboardRequest, id: uuid.UUID, task_id: uuid.UUID) -> HttpResponse:
        team = _team(request, id)
        if (refused := _act_refusal(request, team)) is not None:
            return refused
        return view(request, team, _task(team, task_id))

    return acting


def _escalations(team: Team | None, tenant: Any) -> QuerySet[Escalation]:
    return selectors.escalation_list(tenant=tenant, team=team)


def _escalation(team: Team, escalation_id: uuid.UUID) -> Escalation:
    escalation = _escalations(team, team.tenant).filter(pk=escalation_id).first()
    if escalation is None:
        raise Http404("No escalation with this id on this team.")
    return escalation


def _members(team: Team, *, with_lead: bool = True) -> list[Agent]:
    rows = selectors.members(tenant=team.tenant, team=team)
    return [m.agent for m in rows if with_lead or m.agent_id != team.lead_id]


def _act(request: DashboardRequest, action: Callable[[], str]) -> bool:
    """Run a board action: its success message, or the refusal as an error message."""
    try:
        message = action()
    except (ServiceError, BoardError) as exc:
        messages.error(request, exc.message)
        return False
    messages.success(request, message)
    return True


def _task_url(team: Team, task: Task | uuid.UUID) -> str:
    task_id = task.pk if isinstance(task, Task) else task
    return reverse("dashboard:team_task", args=[team.pk, task_id])


def _live_config(team: Team) -> dict[str, Any]:
    return {
        "topic": board.topic(team),
        "team": str(team.pk),
        "task_url": reverse("dashboard:team_task", args=[team.pk, PLACEHOLDER]),
    }


# --- teams ----------------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def team_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's teams (active first) with their lead, members and open work."""
    tenant = request.actor.tenant
    teams = list(selectors.team_overview(actor=request.actor)[:500])
    open_tasks = selectors.open_task_counts(tenant=tenant)
    open_escalations = selectors.open_escalation_counts(tenant=tenant)
    rows = [
        {"team": t, "open_tasks": open_tasks.get(t.pk, 0), "open_escalations": open_escalations.get(t.pk, 0)}
        for t in teams
    ]
    return render(
        request,
        "dashboard/teams/list.html",
        {"rows": rows, "can_configure": request.actor.can(Role.ADMIN)},
    )


@dashboard_view(Role.ADMIN)
def team_create(request: DashboardRequest) -> HttpResponse:
    """Create a team: a name, a lead and members from the tenant's agents."""
    agents = list(agent_list(tenant=request.actor.tenant)[:1000])
    form = TeamCreateForm(request.POST if request.method == "POST" else None, agents=agents)
    if request.method == "POST" and form.is_valid():
        try:
            team = services.team_create(
                actor=request.actor,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                lead=form.lead_agent(),
                members=form.member_agents(),
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Team {team.name} created.")
            return redirect("dashboard:team_board", id=team.pk)
    return render(request, "dashboard/teams/create.html", {"form": form, "has_agents": bool(agents)})


@dashboard_view(Role.ADMIN)
def team_settings(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Rename the team and change its settings (the blocker-escalation toggle among them); add and
    remove members."""
    team = _team(request, id)
    form = TeamSettingsForm(
        request.POST if request.method == "POST" else None,
        current=team.settings or {},
        initial=TeamSettingsForm.initial_for(team),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.team_update(
                actor=request.actor,
                team=team,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                settings=form.settings(),
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Settings of {form.cleaned_data['name']} saved.")
            return redirect("dashboard:team_settings", id=team.pk)
    members = list(selectors.members(tenant=team.tenant, team=team))
    joined = {m.agent_id for m in members}
    candidates = [a for a in agent_list(tenant=team.tenant)[:1000] if a.pk not in joined]
    return render(
        request,
        "dashboard/teams/settings.html",
        {
            "team": team,
            "form": form,
            "members": members,
            "add_form": TeamMemberAddForm(agents=candidates),
            "candidates": candidates,
        },
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def team_member_add(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    team = _team(request, id)
    joined = {a.pk for a in _members(team)}
    candidates = [a for a in agent_list(tenant=team.tenant)[:1000] if a.pk not in joined]
    form = TeamMemberAddForm(request.POST, agents=candidates)
    if not form.is_valid():
        messages.error(request, "Choose an agent of this tenant that is not in the team yet.")
    else:
        agent = form.agents[form.cleaned_data["agent"]]
        try:
            services.member_add(actor=request.actor, team=team, agent=agent)
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"{agent.key} joined {team.name}.")
    return redirect("dashboard:team_settings", id=team.pk)


@dashboard_view(Role.ADMIN)
def team_member_remove(request: DashboardRequest, id: uuid.UUID, key: str) -> HttpResponse:
    """Ask for confirmation (GET), then take the agent off the team (POST); the lead stays."""
    team = _team(request, id)
    agent = access_member(actor=request.actor, team=team, key=key)

    def perform() -> str:
        services.member_remove(actor=request.actor, team=team, agent=agent)
        return f"{agent.key} left {team.name}."

    return confirm_action(
        request,
        title=f"Remove {agent.key} from {team.name}?",
        body="Its tasks stay on the board with their owner; it gets no new work from this team.",
        action="Remove member",
        back=reverse("dashboard:team_settings", args=[team.pk]),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def team_archive(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then archive the team (POST): its board stays readable."""
    team = _team(request, id)

    def perform() -> tuple[str, str]:
        services.team_archive(actor=request.actor, team=team)
        return f"Team {team.name} archived.", reverse("dashboard:teams")

    return confirm_action(
        request,
        title=f"Archive team {team.name}?",
        body="The team takes no new tasks and the ticker leaves it alone; its board and audit log stay "
        "readable. This cannot be undone from the dashboard.",
        action="Archive team",
        back=reverse("dashboard:team_settings", args=[team.pk]),
        perform=perform,
    )


# --- the board ------------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def team_board(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """The team's tasks in columns by status, optionally of one chat; it follows the team's topic
    live (static/js/team-board.js)."""
    team = _team(request, id)
    tasks = selectors.board_tasks(team=team)
    chats = list(
        tasks.exclude(chat_id="").order_by("chat_id").values_list("chat_id", flat=True).distinct()[:MAX_CHATS]
    )
    chat = request.GET.get("chat", "")[:255]
    if chat:
        tasks = tasks.filter(chat_id=chat)
    counts = dict(tasks.values("status").annotate(n=Count("id")).values_list("status", "n"))
    by_status: dict[str, list[Task]] = {}
    for status in COLUMNS:
        order = ("-updated_at", "-id") if status in FINISHED else ("-priority", "created_at", "id")
        by_status[status] = list(
            tasks.filter(status=status).select_related("owner").order_by(*order)[:COLUMN_CARDS]
        )
    waiting_on = selectors.blockers_of(team, [t for cards in by_status.values() for t in cards])
    escalations = list(_escalations(team, team.tenant).filter(state=Escalation.State.OPEN)[:PAGE_SIZE])
    escalated = {e.task_id for e in escalations}
    columns = [
        {
            "status": status,
            "label": Status(status).label,
            "total": counts.get(status, 0),
            "cards": [
                {
                    "task": task,
                    "waits_on": [waiting_on[b] for b in task.blocked_by if b in waiting_on],
                    "escalated": task.pk in escalated,
                }
                for task in cards
            ],
        }
        for status, cards in by_status.items()
    ]
    return render(
        request,
        "dashboard/teams/board.html",
        {
            "team": team,
            "columns": columns,
            "chats": chats,
            "chat": chat,
            "escalations": escalations,
            "can_act": visibility.can_act(request.actor, team) and team.status == Team.Status.ACTIVE,
            "live_config": {**_live_config(team), "chat": chat},
        },
    )


@dashboard_view(Role.MEMBER)
def task_create(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """A new task on the board (from the dashboard's chat, as the user)."""
    team = _team(request, id)
    if (refused := _act_refusal(request, team)) is not None:
        return refused
    form = TaskCreateForm(
        request.POST if request.method == "POST" else None, members=_members(team, with_lead=False)
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        user = request.actor.user
        try:
            task = services.task_create(
                actor=request.actor,
                team=team,
                owner=form.owner_agent(),
                subject=data["subject"],
                description=data["description"],
                priority=data["priority"],
                require_approval=data["require_approval"],
                chat_id=data["chat_id"],
                channel="dashboard",
                user_id=str(getattr(user, "email", "") or "") if user is not None else "",
            )
        except (ServiceError, BoardError) as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(
                request, f"Task {task.identifier} created ({task.get_status_display().lower()})."
            )
            return redirect(_task_url(team, task))
    return render(request, "dashboard/teams/task_form.html", {"team": team, "form": form})


# --- one task -------------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def task_detail(request: DashboardRequest, id: uuid.UUID, task_id: uuid.UUID) -> HttpResponse:
    """A task: description, result, comments (blockers marked), its events, attachments, and the
    actions its status allows."""
    team = _team(request, id)
    detail = selectors.task_detail(team=team, task_id=task_id)
    if detail is None:
        raise Http404("No task with this id on this team's board.")
    task = detail.task
    status = task.status
    members = _members(team, with_lead=False)
    return render(
        request,
        "dashboard/teams/task.html",
        {
            "team": team,
            "task": task,
            "detail": detail,
            "waits_on": [detail.blockers[b] for b in task.blocked_by if b in detail.blockers],
            "escalations": list(_escalations(team, team.tenant).filter(task_id=task.pk)[:50]),
            "can_act": visibility.can_act(request.actor, team),
            "can": {
                "assign": status == Status.PENDING and bool(members),
                "cancel": status not in (Status.COMPLETED, Status.CANCELLED),
                "retry": status in board.RETRYABLE,
                "review": status == Status.IN_REVIEW,
            },
            "assign_form": TaskAssignForm(
                members=members, initial={"agent": task.owner.key if task.owner else ""}
            ),
            "retry_form": TaskRetryForm(id_prefix="retry"),
            "reject_form": TaskReasonForm(id_prefix="reject", required=True),
            "comment_form": TaskCommentForm(),
            "live_config": {**_live_config(team), "task": str(task.pk)},
        },
    )


@dashboard_view(Role.MEMBER, methods=("POST",))
@_task_action
def task_assign(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:
    form = TaskAssignForm(request.POST, members=_members(team, with_lead=False))
    if not form.is_valid():
        messages.error(request, "Choose a member of the team (not its lead).")
        return redirect(_task_url(team, task))
    agent = form.members[form.cleaned_data["agent"]]

    def assign() -> str:
        done = services.task_assign(actor=request.actor, team=team, task_id=task.pk, agent=agent)
        return f"{done.identifier} assigned to {agent.key} ({done.get_status_display().lower()})."

    _act(request, assign)
    return redirect(_task_url(team, task))


@dashboard_view(Role.MEMBER)
@_task_action
def task_cancel(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:
    """Ask for confirmation and a reason (GET), then cancel the task (POST); tasks waiting on it are
    unblocked."""
    form = TaskReasonForm(request.POST if request.method == "POST" else None, id_prefix="cancel")
    if request.method == "POST" and form.is_valid():
        reason = form.cleaned_data["reason"] or "Cancelled by user"

        def cancel() -> str:
            services.task_cancel(actor=request.actor, team=team, task_id=task.pk, reason=reason)
            return f"{task.identifier} cancelled."

        _act(request, cancel)
        return redirect(_task_url(team, task))
    return render(request, "dashboard/teams/cancel.html", {"team": team, "task": task, "form": form})


@dashboard_view(Role.MEMBER, methods=("POST",))
@_task_action
def task_retry(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:
    """Reopen the task for its owner (dispatched again at once), with an optional note."""
    _retry(request, team, task, TaskRetryForm(request.POST, id_prefix="retry"))
    return redirect(_task_url(team, task))


def _retry(request: DashboardRequest, team: Team, task: Task, form: TaskRetryForm) -> None:
    if not form.is_valid():
        messages.error(request, "The note may have at most 500 characters and the instructions at most 4000.")
        return
    note = form.cleaned_data["reason"]
    instructions = form.cleaned_data["instructions"]

    def retry() -> str:
        done = services.task_retry(
            actor=request.actor, team=team, task_id=task.pk, note=note, instructions=instructions
        )
        return f"{done.identifier} retried ({done.get_status_display().lower()})."

    _act(request, retry)


@dashboard_view(Role.MEMBER, methods=("POST",))
@_task_action
def task_approve(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:

    def approve() -> str:
        done = services.task_approve(actor=request.actor, team=team, task_id=task.pk)
        return f"{done.identifier} approved ({done.get_status_display().lower()})."

    _act(request, approve)
    return redirect(_task_url(team, task))


@dashboard_view(Role.MEMBER, methods=("POST",))
@_task_action
def task_reject(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:
    """Send reviewed work back to its owner with the reason (cancel it when it has none)."""
    form = TaskReasonForm(request.POST, id_prefix="reject", required=True)
    if not form.is_valid():
        messages.error(request, "Say why the work is rejected (at most 500 characters).")
        return redirect(_task_url(team, task))
    reason = form.cleaned_data["reason"]

    def reject() -> str:
        done = services.task_reject(actor=request.actor, team=team, task_id=task.pk, reason=reason)
        return f"{done.identifier} rejected ({done.get_status_display().lower()})."

    _act(request, reject)
    return redirect(_task_url(team, task))


@dashboard_view(Role.MEMBER, methods=("POST",))
@_task_action
def task_comment(request: DashboardRequest, team: Team, task: Task) -> HttpResponse:
    """A note or a blocker (a blocker fails a task in progress and escalates it)."""
    form = TaskCommentForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(str(m) for m in e)}" for name, e in form.errors.items())
        messages.error(request, f"Comment not saved — {errors}")
        return redirect(_task_url(team, task))

    def comment() -> str:
        done = services.task_comment(
            actor=request.actor,
            team=team,
            task_id=task.pk,
            text=form.cleaned_data["text"],
            kind=form.cleaned_data["type"],
        )
        return done.message

    _act(request, comment)
    return redirect(_task_url(team, task))


# --- escalations ----------------------------------------------------------------------------------------


def _escalation_page(
    request: DashboardRequest,
    queryset: QuerySet[Escalation],
    template: str,
    context: dict[str, Any],
    *,
    can_act: bool,
) -> HttpResponse:
    filtering = "state" in request.GET
    form = EscalationFilterForm(request.GET if filtering else None)
    filters = form.filters()
    if "state" in filters:
        queryset = queryset.filter(state=filters["state"])
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    live_config = {**context.pop("live_config"), "state_filter": filters.get("state", ""), "can_act": can_act}
    return render(
        request,
        template,
        {
            **context,
            "live_config": live_config,
            "form": form,
            "page": page,
            "filtered": bool(filters),
            "can_act": can_act,
            "live": page.number == 1,
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def escalation_inbox(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """The team's escalations, newest first: open, retried or resolved; new ones arrive live."""
    team = _team(request, id)
    return _escalation_page(
        request,
        _escalations(team, team.tenant),
        "dashboard/teams/escalations.html",
        {
            "team": team,
            "live_config": {**_live_config(team), "topics": [board.topic(team)], **_escalation_urls(team)},
        },
        can_act=visibility.can_act(request.actor, team),
    )


def _escalation_urls(team: Team | None) -> dict[str, str]:
    team_id = team.pk if team is not None else TEAM_PLACEHOLDER
    return {
        "retry_url": reverse("dashboard:team_escalation_retry", args=[team_id, PLACEHOLDER]),
        "resolve_url": reverse("dashboard:team_escalation_resolve", args=[team_id, PLACEHOLDER]),
        "task_url": reverse("dashboard:team_task", args=[team_id, PLACEHOLDER]),
    }


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def escalations_all(request: DashboardRequest) -> HttpResponse:
    """Every team's escalations in one inbox (live for the tenant's active teams), of the teams the
    user's grants reach."""
    tenant = request.actor.tenant
    teams = list(selectors.active_teams(actor=request.actor)[:MAX_TEAMS_LIVE])
    return _escalation_page(
        request,
        _escalations(None, tenant).filter(visibility.team_visibility(request.actor, "team_id")),
        "dashboard/teams/escalations.html",
        {
            "team": None,
            "live_config": {
                "topics": [board.topic(t) for t in teams],
                "team_names": {str(t.pk): t.name for t in teams},
                **_escalation_urls(None),
            },
        },
        can_act=request.actor.can(Role.MEMBER),
    )


def _back_to(request: DashboardRequest, team: Team) -> str:
    """Where an inbox action returns: the page it was posted from when it is one of ours."""
    back = request.POST.get("next", "")
    allowed = (reverse("dashboard:team_escalations", args=[team.pk]), reverse("dashboard:escalations"))
    if back.split("?")[0] in allowed:
        return back
    return allowed[0]


@dashboard_view(Role.MEMBER, methods=("POST",))
def escalation_retry(request: DashboardRequest, id: uuid.UUID, escalation_id: uuid.UUID) -> HttpResponse:
    """Reopen the escalated task for its member (its open escalations count as retried)."""
    team = _team(request, id)
    if (refused := _act_refusal(request, team)) is not None:
        return refused
    escalation = _escalation(team, escalation_id)
    if escalation.state != Escalation.State.OPEN:
        messages.error(request, f"This escalation is {escalation.state} already; open the task to act on it.")
    else:
        _retry(request, team, escalation.task, TaskRetryForm(request.POST, id_prefix="retry"))
    return redirect(_back_to(request, team))


@dashboard_view(Role.MEMBER, methods=("POST",))
def escalation_resolve(request: DashboardRequest, id: uuid.UUID, escalation_id: uuid.UUID) -> HttpResponse:
    """Mark the escalation resolved (the task stays as it is)."""
    team = _team(request, id)
    if (refused := _act_refusal(request, team)) is not None:
        return refused
    escalation = _escalation(team, escalation_id)

    def resolve() -> str:
        services.escalation_resolve(actor=request.actor, team=team, escalation_id=escalation.pk)
        return f"Escalation of {escalation.task.identifier} resolved."

    _act(request, resolve)
    return redirect(_back_to(request, team))


# --- the audit log --------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def team_audit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """The team's task events, newest first, by event type and task (events of deleted tasks stay)."""
    team = _team(request, id)
    filtering = any(name in request.GET for name in TaskEventFilterForm.base_fields)
    form = TaskEventFilterForm(request.GET if filtering else None)
    filters = form.filters()
    events = selectors.team_events(team=team)
    if "event_type" in filters:
        events = events.filter(event_type=filters["event_type"])
    if "task" in filters:
        events = events.filter(task_identifier=filters["task"].strip())
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/teams/audit.html",
        {"team": team, "form": form, "page": page, "filtered": bool(filters)},
    )
