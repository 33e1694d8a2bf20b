"""Reads of runs and scheduled jobs: the lists with their filters, one by id, a run's subagent tree and a
job's firings.

Every read is narrowed to the tenant it is given. A lookup by id answers None for a malformed id, a
missing row and another tenant's alike; the caller turns that into its own 404.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

from apps.runs.models import ACTIVE, CronFiring, CronJob, Run

if TYPE_CHECKING:
    from apps.sessions.models import Session
    from apps.tenants.models import Agent, Tenant

MAX_TREE_DEPTH = 4
MAX_TREE_RUNS = 200
MAX_FIRINGS = 100


def _uuid(value: uuid.UUID | str) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def run_list(
    *,
    tenant: Tenant,
    agent: Agent | None = None,
    agent_key: str = "",
    status: str = "",
    kind: str = "",
    session: Session | uuid.UUID | None = None,
) -> QuerySet[Run]:
    """The tenant's runs, newest first, with their agent and session; each filter given narrows them
    (``agent`` or ``agent_key`` to one agent's, ``session`` to one session's)."""
    runs = Run.objects.for_tenant(tenant).select_related("agent", "session")
    if agent is not None:
        runs = runs.filter(agent=agent)
    if agent_key:
        runs = runs.filter(agent__key=agent_key)
    if status:
        runs = runs.filter(status=status)
    if kind:
        runs = runs.filter(kind=kind)
    if session is not None:
        runs = runs.filter(session_id=getattr(session, "pk", session))
    return runs.order_by("-created_at", "id")


def run_get(*, tenant: Tenant, id: uuid.UUID | str) -> Run | None:
    """The tenant's run ``id`` with its agent, session and parent run, or None."""
    pk = _uuid(id)
    if pk is None:
        return None
    return Run.objects.for_tenant(tenant).select_related("agent", "session", "parent").filter(pk=pk).first()


@dataclass
class TreeNode:
    run: Run
    children: list[TreeNode] = field(default_factory=list)


def run_subagent_tree(*, tenant: Tenant, run: Run) -> list[TreeNode]:
    """The runs ``run`` spawned, level by level: runs whose parent is a run of the tree, and runs in
    sessions whose parent is the session of a run of the tree (at most ``MAX_TREE_DEPTH`` levels and
    ``MAX_TREE_RUNS`` runs)."""
    tenant_runs = Run.objects.for_tenant(tenant).select_related("agent", "session")
    nodes = {run.pk: TreeNode(run)}
    level = [run]
    for _ in range(MAX_TREE_DEPTH):
        if not level or len(nodes) >= MAX_TREE_RUNS:
            break
        by_session = {r.session_id: r for r in reversed(level)}
        found = list(
            tenant_runs.filter(
                Q(parent_id__in=[r.pk for r in level]) | Q(session__parent_id__in=list(by_session))
            )
            .exclude(pk__in=list(nodes))
            .order_by("created_at", "id")[: MAX_TREE_RUNS - len(nodes)]
        )
        for child in found:
            if child.parent_id in nodes:
                owner = nodes[child.parent_id]
            else:
                owner = nodes[by_session[child.session.parent_id].pk]  # type: ignore[index]
            node = TreeNode(child)
            owner.children.append(node)
            nodes[child.pk] = node
        level = found
    return nodes[run.pk].children


def cron_job_list(*, tenant: Tenant, agent_key: str = "") -> QuerySet[CronJob]:
    """The tenant's scheduled jobs with their agent, by agent key and name; ``agent_key`` narrows them
    to one agent's."""
    jobs = CronJob.objects.for_tenant(tenant).select_related("agent")
    if agent_key:
        jobs = jobs.filter(agent__key=agent_key)
    return jobs.order_by("agent__key", "name", "id")


def cron_job_get(*, tenant: Tenant, id: uuid.UUID | str) -> CronJob | None:
    """The tenant's scheduled job ``id`` with its agent, or None."""
    pk = _uuid(id)
    if pk is None:
        return None
    return CronJob.objects.for_tenant(tenant).select_related("agent").filter(pk=pk).first()


def cron_firing_list(*, tenant: Tenant, job: CronJob) -> QuerySet[CronFiring]:
    """The latest ``MAX_FIRINGS`` firings of ``job``, newest first, with the run each started."""
    return (
        CronFiring.objects.for_tenant(tenant)
        .filter(job=job)
        .select_related("run")
        .order_by("-created_at", "id")[:MAX_FIRINGS]
    )


def agent_cron_jobs(*, tenant: Tenant, agent: Agent) -> QuerySet[CronJob]:
    """The agent's own scheduled jobs with their agent, oldest first (what its cron tool manages)."""
    return (
        CronJob.objects.for_tenant(tenant).select_related("agent").filter(agent=agent).order_by("created_at")
    )


def agent_cron_job(*, tenant: Tenant, agent: Agent, ref: str) -> CronJob | None:
    """The agent's job whose id, or else whose name, is ``ref``; None when it has none such."""
    jobs = agent_cron_jobs(tenant=tenant, agent=agent)
    pk = _uuid(ref)
    job = jobs.filter(pk=pk).first() if pk is not None else None
    return job if job is not None else jobs.filter(name=ref).first()


def subagent_runs(*, tenant: Tenant, session: Session) -> QuerySet[Run]:
    """The subagent runs started from ``session`` (in sessions whose parent it is), with their session
    and agent, unordered."""
    return (
        Run.objects.for_tenant(tenant)
        .filter(kind=Run.Kind.SUBAGENT, session__parent=session)
        .select_related("session", "agent")
    )


def active_subagent_count(*, tenant: Tenant) -> int:
    """How many subagent runs of the tenant are queued, running or waiting."""
    return Run.objects.for_tenant(tenant).filter(kind=Run.Kind.SUBAGENT, status__in=ACTIVE).count()


def running_run(*, tenant: Tenant, session: Session) -> Run | None:
    """The newest run of ``session`` that is running now, or None."""
    return (
        Run.objects.for_tenant(tenant)
        .filter(session=session, status=Run.Status.RUNNING)
        .order_by("-created_at")
        .first()
    )


def open_run_of_agent(*, tenant: Tenant, agent: Agent, id: uuid.UUID | str) -> Run | None:
    """The tenant's run ``id`` of ``agent`` while it is running or waiting (the run a tool call may
    name as its own), or None."""
    pk = _uuid(id)
    if pk is None:
        return None
    return (
        Run.objects.for_tenant(tenant)
        .filter(pk=pk, agent=agent, status__in=[Run.Status.RUNNING, Run.Status.WAITING])
        .only("id")
        .first()
    )


def failed_run_count(
    *, tenant: Tenant, since: datetime, starters: Sequence[tuple[str, str]] | None = None
) -> int:
    """How many runs of ``tenant`` created since ``since`` failed; with ``starters`` ((kind, id) pairs),
    only the runs those actors started."""
    runs = Run.objects.for_tenant(tenant).filter(status=Run.Status.FAILED, created_at__gte=since)
    if starters is not None:
        mine = Q(pk__in=[])
        for kind, id_ in starters:
            mine |= Q(started_by_kind=kind, started_by_id=id_)
        runs = runs.filter(mine)
    return int(runs.count())
