"""Reads of the task board: listing with the ``team_tasks`` tool's semantics, a task's detail, and
search (SPEC B §2.4); and, for the REST API and the dashboard, the teams a user's grants reach with
their members, user grants, escalations and task events (the lists across teams narrowed to the tenant).

Every read is narrowed to one tenant and one team. The filters are explicit arguments: the tool decides
from its call context which chat and which user a caller sees (see ``apps.teams.agent_tools``); the REST API
passes what a human asked for.

Status filters (``status``):

* ``""`` and ``"active"``: everything not completed or cancelled (failed, stale and in-review included);
* ``"completed"``: completed and cancelled;
* ``"in_review"``: in review only;
* ``"all"``: every status.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import Count, F, Func, IntegerField, QuerySet
from pgvector.django import CosineDistance

from apps.teams.models import (
    Escalation,
    Task,
    TaskAttachment,
    TaskComment,
    TaskEvent,
    Team,
    TeamMember,
    TeamUserGrant,
)
from apps.teams.visibility import team_visibility
from apps.tenants.models import Agent

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Tenant

Status = Task.Status

PAGE_SIZE = 30
SEARCH_LIMIT = 5
RESULT_DETAIL_CHARS = 8000
FTS_WEIGHT = 0.3
VECTOR_WEIGHT = 0.7
STATUS_FILTERS = ("", "all", "active", "completed", "in_review")
MAX_QUERY_WORDS = 20
_NOT_A_WORD_CHAR = re.compile(r"[^\w-]", re.UNICODE)


class SelectorError(ValueError):
    """A read refused for its input; the message is written for the caller to act on."""


def team_for_agent(*, tenant: Tenant, agent: Agent) -> Team | None:
    """The active team an agent works in: the one it leads, else the first it joined; None without one."""
    led = Team.objects.for_tenant(tenant).filter(lead_id=agent.pk, status=Team.Status.ACTIVE).first()
    if led is not None:
        return led
    membership = (
        TeamMember.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, team__status=Team.Status.ACTIVE)
        .select_related("team")
        .order_by("created_at", "id")
        .first()
    )
    return membership.team if membership is not None else None


def team_with_lead(*, tenant: Tenant, team_id: uuid.UUID) -> Team:
    """The team, with its tenant and lead loaded."""
    return Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=team_id)


def member_by_key(*, team: Team, key: str) -> TeamMember | None:
    """The team's membership of the agent with this key (its agent loaded), or None."""
    return (
        TeamMember.objects.for_tenant(team.tenant)
        .filter(team_id=team.pk, agent__key=key)
        .select_related("agent")
        .first()
    )


def member_keys(*, team: Team, lead: bool) -> list[str]:
    """The keys of the team's members, sorted; the lead's only when ``lead``."""
    rows = TeamMember.objects.for_tenant(team.tenant).filter(team_id=team.pk)
    if not lead:
        rows = rows.exclude(agent_id=team.lead_id)
    return list(rows.order_by("agent__key").values_list("agent__key", flat=True))


def members_besides_lead(*, team: Team) -> QuerySet[TeamMember]:
    """The team's memberships other than the lead's, with their agents, by agent key."""
    return (
        TeamMember.objects.for_tenant(team.tenant)
        .filter(team_id=team.pk)
        .exclude(agent_id=team.lead_id)
        .select_related("agent")
        .order_by("agent__key")
    )


def _board(team: Team) -> QuerySet[Task]:
    return Task.objects.for_tenant(team.tenant).filter(team_id=team.pk)


def board_tasks(*, team: Team) -> QuerySet[Task]:
    """Every task on ``team``'s board, unordered."""
    return _board(team)


def filter_by_status(queryset: QuerySet[Task], status: str) -> QuerySet[Task]:
    """Narrow ``queryset`` by one of :data:`STATUS_FILTERS` (see the module docstring)."""
    if status not in STATUS_FILTERS:
        raise SelectorError(f"status must be one of: all, active, completed, in_review (got {status[:40]!r})")
    if status in ("", "active"):
        return queryset.exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
    if status == "completed":
        return queryset.filter(status__in=[Status.COMPLETED, Status.CANCELLED])
    if status == "in_review":
        return queryset.filter(status=Status.IN_REVIEW)
    return queryset


@dataclass(frozen=True)
class TaskPage:
    tasks: list[Task]
    page: int
    has_more: bool
    # Every task some listed task waits on, by id (for "blocked by T-002 (pending, alice)").
    blockers: dict[uuid.UUID, Task] = field(default_factory=dict)


def task_list(
    *,
    team: Team,
    status: str = "",
    page: int = 1,
    chat_id: str | None = None,
    user_id: str | None = None,
    page_size: int = PAGE_SIZE,
) -> TaskPage:
    """One page of a team's tasks, highest priority first, then oldest first.

    ``chat_id`` (when not None) keeps the tasks of that conversation only; ``user_id`` (when not empty)
    keeps the tasks that user asked for. Pages hold ``page_size`` tasks (30); ``has_more`` says whether
    another page follows."""
    if isinstance(page, bool) or not isinstance(page, int) or page < 1 or page > 10_000:
        raise SelectorError("page must be an integer from 1 to 10000")
    queryset = filter_by_status(_board(team), status)
    if chat_id is not None:
        queryset = queryset.filter(chat_id=chat_id)
    if user_id:
        queryset = queryset.filter(user_id=user_id)
    start = (page - 1) * page_size
    rows = list(
        queryset.select_related("owner", "created_by_agent").order_by("-priority", "created_at", "id")[
            start : start + page_size + 1
        ]
    )
    tasks = rows[:page_size]
    return TaskPage(tasks=tasks, page=page, has_more=len(rows) > page_size, blockers=blockers_of(team, tasks))


def blockers_of(team: Team, tasks: Iterable[Task]) -> dict[uuid.UUID, Task]:
    """The tasks that ``tasks`` wait on, by id, in one query."""
    ids = {b for task in tasks for b in task.blocked_by}
    if not ids:
        return {}
    return {t.pk: t for t in _board(team).filter(pk__in=ids).select_related("owner")}


def task_get(*, team: Team, task_id: uuid.UUID | str) -> Task | None:
    """A task of ``team`` by id; None for a missing id and for another team's or tenant's task."""
    try:
        ident = uuid.UUID(str(task_id))
    except ValueError:
        return None
    return (
        _board(team)
        .select_related("owner", "created_by_agent", "team", "team__tenant")
        .filter(pk=ident)
        .first()
    )


def truncate_result(result: str, limit: int = RESULT_DETAIL_CHARS) -> str:
    return result if len(result) <= limit else result[:limit] + "…"


@dataclass(frozen=True)
class TaskDetail:
    task: Task
    result: str  # truncated to 8000 characters
    comments: list[TaskComment]
    events: list[TaskEvent]
    attachments: list[TaskAttachment]
    blockers: dict[uuid.UUID, Task]


def task_detail(*, team: Team, task_id: uuid.UUID | str) -> TaskDetail | None:
    """A task with its comments, events and attachments (oldest first); None when not on the board."""
    task = task_get(team=team, task_id=task_id)
    if task is None:
        return None
    tenant = team.tenant
    return TaskDetail(
        task=task,
        result=truncate_result(task.result),
        comments=list(
            TaskComment.objects.for_tenant(tenant).filter(task_id=task.pk).select_related("agent")[:500]
        ),
        events=list(TaskEvent.objects.for_tenant(tenant).filter(task_id=task.pk)[:500]),
        attachments=list(TaskAttachment.objects.for_tenant(tenant).filter(task_id=task.pk)[:500]),
        blockers=blockers_of(team, [task]),
    )


# --- search ---------------------------------------------------------------------------------------------


def embed(text: str) -> list[float] | None:
    """The embedding of ``text`` for task search, or None when no embedding provider is configured.

    This deployment has none yet: search then runs on full text alone and says so."""
    return None


def search_terms(query: str) -> str:
    """A ``to_tsquery('simple', …)`` expression: every word (letters, digits, ``-`` and ``_`` kept)
    as a prefix match, all of them required: ``deploy api`` → ``deploy:* & api:*``."""
    words: list[str] = []
    for raw in query.split():
        word = _NOT_A_WORD_CHAR.sub("", raw).strip("-")
        # A hyphen inside a prefix term would split it into two lexemes; keep the parts as words.
        for part in word.split("-"):
            if part and part.lower() not in {w.lower() for w in words}:
                words.append(part)
    return " & ".join(f"{w}:*" for w in words[:MAX_QUERY_WORDS])


@dataclass(frozen=True)
class SearchHit:
    task: Task
    score: float
    fts_rank: float = 0.0
    similarity: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    mode: str  # "fts" (full text only) or "hybrid" (full text 0.3 + vector similarity 0.7)
    terms: str = ""


class _VectorDims(Func):
    function = "vector_dims"
    output_field = IntegerField()


def task_search(
    *, team: Team, query: str, user_id: str | None = None, limit: int = SEARCH_LIMIT
) -> SearchResult:
    """Full-text search over a team's tasks (subject and description, config ``simple``, ranked by
    ``ts_rank``), merged with vector similarity of the task embeddings when :func:`embed` gives one for
    the query (weights 0.3 full text, 0.7 vector). ``user_id`` (when not empty) keeps that user's tasks.
    """
    if not isinstance(query, str) or not query.strip():
        raise SelectorError("query is required")
    if len(query) > 500:
        raise SelectorError("query is longer than 500 characters")
    terms = search_terms(query)
    base = _board(team)
    if user_id:
        base = base.filter(user_id=user_id)
    fts: list[tuple[Task, float]] = []
    if terms:
        tsquery = SearchQuery(terms, search_type="raw", config="simple")
        fts = [
            (task, float(task.rank))
            for task in base.filter(search_vector=tsquery)
            .annotate(rank=SearchRank(F("search_vector"), tsquery))
            .select_related("owner")
            .order_by("-rank", "-priority", "created_at")[: limit * 2]
        ]
    vector = embed(query)
    if not vector:
        if not terms:
            raise SelectorError("query has no searchable words (letters or digits)")
        return SearchResult(
            hits=[SearchHit(task, rank, fts_rank=rank) for task, rank in fts[:limit]], mode="fts", terms=terms
        )
    near = (
        base.filter(embedding__isnull=False)
        .annotate(dims=_VectorDims("embedding"))
        .filter(dims=len(vector))
        .annotate(distance=CosineDistance("embedding", vector))
        .select_related("owner")
        .order_by("distance")[: limit * 2]
    )
    return SearchResult(
        hits=_merge(fts, [(t, 1.0 - float(t.distance)) for t in near], limit), mode="hybrid", terms=terms
    )


def _merge(
    fts: Sequence[tuple[Task, float]], near: Sequence[tuple[Task, float]], limit: int
) -> list[SearchHit]:
    """Weighted merge: full-text ranks normalised by the best one, times 0.3, plus cosine similarity
    times 0.7; a task found both ways adds both."""
    top = max((rank for _, rank in fts), default=0.0) or 1.0
    by_id: dict[uuid.UUID, dict[str, Any]] = {}
    for task, rank in fts:
        by_id[task.pk] = {"task": task, "fts": rank / top, "sim": 0.0}
    for task, similarity in near:
        entry = by_id.setdefault(task.pk, {"task": task, "fts": 0.0, "sim": 0.0})
        entry["sim"] = max(0.0, similarity)
    hits = [
        SearchHit(
            e["task"],
            FTS_WEIGHT * e["fts"] + VECTOR_WEIGHT * e["sim"],
            fts_rank=e["fts"],
            similarity=e["sim"],
        )
        for e in by_id.values()
    ]
    hits.sort(key=lambda h: (-h.score, -h.task.priority, h.task.created_at))
    return hits[:limit]


# --- teams, members, grants, escalations and events -------------------------------------------------------


def team_overview(*, actor: Actor) -> QuerySet[Team]:
    """The teams of the actor's tenant that its user grants reach, with their lead and member count,
    active first, then by name."""
    return (
        Team.objects.for_tenant(actor.tenant)
        .filter(team_visibility(actor))
        .select_related("lead")
        .annotate(member_count=Count("members", distinct=True))
        .order_by("status", "name")
    )


def active_teams(*, actor: Actor) -> QuerySet[Team]:
    """The active teams of the actor's tenant that its user grants reach, by name."""
    return (
        Team.objects.for_tenant(actor.tenant)
        .filter(team_visibility(actor), status=Team.Status.ACTIVE)
        .order_by("name")
    )


def team_get(*, actor: Actor, id: uuid.UUID) -> Team | None:
    """The team ``id`` of the actor's tenant, with its tenant and lead; None when it is missing, another
    tenant's, or one the actor's user grants do not reach."""
    return (
        Team.objects.for_tenant(actor.tenant)
        .select_related("tenant", "lead")
        .filter(team_visibility(actor), pk=id)
        .first()
    )


def open_task_counts(*, tenant: Tenant) -> dict[uuid.UUID, int]:
    """How many tasks not completed or cancelled each team of ``tenant`` has, by team id."""
    return dict(
        Task.objects.for_tenant(tenant)
        .exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
        .values("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )


def open_escalation_counts(*, tenant: Tenant) -> dict[uuid.UUID, int]:
    """How many open escalations each team of ``tenant`` has, by team id."""
    return dict(
        Escalation.objects.for_tenant(tenant)
        .filter(state=Escalation.State.OPEN)
        .values("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )


def members(*, tenant: Tenant, team: Team | None = None) -> QuerySet[TeamMember]:
    """The team memberships of ``tenant`` with their agent; with ``team``, that team's only."""
    rows = TeamMember.objects.for_tenant(tenant).select_related("agent")
    return rows.filter(team_id=team.pk) if team is not None else rows


def member_get(*, tenant: Tenant, team: Team, key: str) -> TeamMember | None:
    """The membership of the agent ``key`` in ``team``, with its agent; None when it is not a member."""
    return (
        TeamMember.objects.for_tenant(tenant)
        .select_related("agent")
        .filter(team_id=team.pk, agent__key=key)
        .first()
    )


def grant_get(*, tenant: Tenant, team: Team, id: uuid.UUID) -> TeamUserGrant | None:
    """The user grant ``id`` on ``team``; None when it is missing or another team's."""
    return TeamUserGrant.objects.for_tenant(tenant).filter(team_id=team.pk, pk=id).first()


def agent_get(*, tenant: Tenant, key: str) -> Agent | None:
    """The agent ``key`` of ``tenant`` (a team's lead or member to be); None when it has none."""
    return Agent.objects.for_tenant(tenant).filter(key=key).first()


def escalation_list(*, tenant: Tenant, team: Team | None = None) -> QuerySet[Escalation]:
    """The escalations of ``tenant`` (with ``team``, that team's), with their task, member and team,
    newest first."""
    rows = Escalation.objects.for_tenant(tenant).select_related("task", "member", "team")
    if team is not None:
        rows = rows.filter(team_id=team.pk)
    return rows.order_by("-created_at", "-id")


def team_events(*, team: Team) -> QuerySet[TaskEvent]:
    """The task events of ``team`` (those of deleted tasks included), newest first."""
    return TaskEvent.objects.for_tenant(team.tenant).filter(team_id=team.pk).order_by("-created_at", "-id")


def open_escalation_total(*, tenant: Tenant) -> int:
    """How many escalations of ``tenant`` are open, over all its teams."""
    return int(Escalation.objects.for_tenant(tenant).filter(state=Escalation.State.OPEN).count())
