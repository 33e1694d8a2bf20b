"""Team tasks run by the built-in runner.

When the board dispatches a task to a member whose runtime setting ``runner`` is ``builtin``, a run of
that member is queued on django-q2 (after the dispatch commits) in a session of the task's own
(``team-task:<task id>``), with the dispatch's message as its input. When the run ends, the board's
post-turn rules are applied (``apps.teams.dispatch.after_member_turn``: a completion or a blocker the
member recorded stands; otherwise the run's answer completes the task, or its error fails it) and the
next dispatch round runs. A blocker that fails the task cancels its run (``run.cancel``).

With ``runner`` ``external`` (the default), nothing happens here: external runners take the
``task.dispatched`` events from the team's topic.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django_q.tasks import async_task

from apps.runs import runner, services
from apps.runs.models import ACTIVE, Run
from apps.teams import dispatch
from apps.teams.models import Task
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.toolkit import runtime_settings

logger = logging.getLogger(__name__)


def builtin(task: Task) -> bool:
    owner = task.owner
    if owner is None:
        return False
    settings = runtime_settings.effective(task.tenant.settings or {}, owner.settings or {})
    return bool(settings.get("runner") == "builtin")


def on_dispatch(task: Task, payload: dict[str, Any]) -> None:
    """The board dispatched ``task``: queue a built-in run when its owner uses the built-in runner."""
    if not builtin(task):
        return
    tenant_id, task_id, message = str(task.tenant_id), str(task.pk), str(payload.get("message", ""))
    user_id = str((payload.get("origin") or {}).get("user_id") or "")
    transaction.on_commit(
        lambda: async_task("apps.runs.tasks.run_team_task", tenant_id, task_id, message, user_id)
    )


def on_cancel_runs(task: Task, reason: str) -> None:
    """The board failed ``task`` (a blocker): its queued or running runs stop."""
    actor = Actor.system(task.tenant)
    for run in Run.objects.for_tenant(task.tenant).filter(task=task, status__in=ACTIVE):
        try:
            services.run_cancel(actor=actor, run=run)
        except ServiceError:
            continue  # it ended meanwhile


def run_task(tenant_id: str, task_id: str, message: str, user_id: str) -> Run | None:
    """Run the task's owner on it; the runner applies the post-turn rules when the run ends. The job
    delivered again after its worker stopped goes on with the run it started (taken over once its
    lease expired; left alone while a worker holds it) instead of starting another."""
    task = (
        Task.objects.dangerously_all_tenants()
        .select_related("tenant", "team", "owner")
        .filter(pk=task_id, tenant_id=tenant_id)
        .first()
    )
    if task is None or task.owner is None or task.status != Task.Status.IN_PROGRESS:
        return None
    text = message or f"Work on task #{task.number}: {task.subject}"
    with transaction.atomic():
        run = (
            Run.objects.for_tenant(task.tenant)
            .select_for_update()
            .filter(task=task, kind=Run.Kind.TEAM_TASK, agent=task.owner, input=text, status__in=ACTIVE)
            .order_by("-created_at")
            .first()
        )
        if run is None:
            run = services.run_create(
                actor=Actor.system(task.tenant),
                agent=task.owner,
                session_key=f"team-task:{task.pk}",
                message=text,
                user_id=user_id,
                kind=Run.Kind.TEAM_TASK,
            )
            run.task = task
            run.save(update_fields=["task", "updated_at"])
    runner.execute(run.pk, run.tenant_id)
    run.refresh_from_db()
    return run


def after_turn(run: Run) -> None:
    """The post-turn rules (SPEC B §2.3) for the end of a member's run on its task."""
    task = (
        Task.objects.for_tenant(run.tenant).select_related("team", "owner").filter(pk=run.task_id).first()
        if run.task_id is not None
        else None
    )
    if task is None:
        return
    error = "" if run.status == Run.Status.COMPLETED else (run.error or run.status)
    try:
        dispatch.after_member_turn(
            task.team,
            task_id=task.pk,
            agent_key=run.agent.key,
            started_at=run.started_at or run.created_at,
            content=run.output,
            error=error,
        )
    except Exception:  # the run is recorded; the board's own ticker recovers a task left in progress
        logger.exception("post-turn rules failed", extra={"run": str(run.pk), "task": str(task.pk)})
