"""Subagents: copies of the calling agent that work on one task in a session of their own (the parent's
key + ``:sub:<id>``), started with the ``spawn`` tool (``apps.runs.agent_tools``).

- ``spawn`` queues the run on django-q2 and answers at once; when it ends, its result is announced to
  the parent's session (results finishing within ``ANNOUNCE_DEBOUNCE_SECONDS`` of each other are
  announced in one message) and, when no run of the parent's session is queued or running, a run of the
  parent is queued to read it.
- ``run`` runs it in the call and answers its result.
- ``list`` shows this session's subagents (archived ones, finished over ``ARCHIVE_AFTER_MINUTES`` ago,
  left out); ``cancel`` takes an id, ``all`` or ``last``; ``steer`` cancels one, waits
  ``STEER_SETTLE_SECONDS`` and spawns it again with the new message.

Limits (seed 000 §6): ``MAX_CONCURRENT`` subagents queued or running in the tenant, ``MAX_CHILDREN`` per
parent session, ``MAX_SPAWN_DEPTH`` (a subagent's tools no longer include spawn), ``SUBAGENT_ITERATIONS``
per run. The deny lists of ``apps.tools.catalog`` apply to a subagent's tools through the policy
(``subagent_depth``). Each refusal says why, in words a model can act on.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from apps.runs import selectors as run_selectors
from apps.runs import services
from apps.runs.models import ACTIVE, Run
from apps.sessions import services as session_services
from apps.sessions.models import Session, SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext

MAX_CONCURRENT = 8
MAX_CHILDREN = 5
SUBAGENT_ITERATIONS = 20
ARCHIVE_AFTER_MINUTES = 60
STEER_SETTLE_SECONDS = 0.5
ANNOUNCE_DEBOUNCE_SECONDS = 1.0


def create(ctx: CallContext, session: Session, task: str, label: str) -> Run:
    """A subagent run of the calling agent in a new child session of ``session``, one level deeper than
    the call (not queued: ``queue`` does that)."""
    parent_run = run_selectors.running_run(tenant=ctx.tenant, session=session)
    key = f"{session.key[:150]}:sub:{uuid.uuid4().hex[:12]}"
    child_session, _ = session_services.session_open(
        actor=ctx.actor,
        agent=ctx.agent,
        key=key,
        user_id=ctx.user_id,
        label=label,
        parent=session,
    )
    run = services.run_create(
        actor=ctx.actor,
        agent=ctx.agent,
        session_key=child_session.key,
        message=task,
        user_id=ctx.user_id,
        kind=Run.Kind.SUBAGENT,
        provider=ctx.provider,
        max_iterations=SUBAGENT_ITERATIONS,
        parent=parent_run,
        runner=services.runner_for(ctx.agent),
    )
    run.depth = ctx.subagent_depth + 1
    run.label = label
    run.save(update_fields=["depth", "label", "updated_at"])
    return run


def queue(run: Run) -> None:
    """A worker runs it (an external run waits for its runner to claim it)."""
    if run.runner != Run.Runner.BUILTIN:
        return
    tenant_id, run_id = str(run.tenant_id), str(run.pk)
    transaction.on_commit(lambda: async_task("apps.runs.tasks.execute_run", tenant_id, run_id))


# --- announcing results --------------------------------------------------------------------------------


def finished(run: Run) -> None:
    """A subagent run ended: announce it (debounced) unless its result was returned directly."""
    if run.kind != Run.Kind.SUBAGENT or run.announced or run.session.parent_id is None:
        return
    tenant_id, session_id = str(run.tenant_id), str(run.session.parent_id)
    transaction.on_commit(lambda: async_task("apps.runs.tasks.announce", tenant_id, session_id))


def announce(tenant_id: str, parent_session_id: str) -> None:
    """Post the results of the parent session's finished, unannounced subagents in one message, once the
    newest of them finished ``ANNOUNCE_DEBOUNCE_SECONDS`` ago; then let the parent read them."""
    pending = Run.objects.dangerously_all_tenants().filter(
        tenant_id=tenant_id,
        kind=Run.Kind.SUBAGENT,
        session__parent_id=uuid.UUID(parent_session_id),
        announced=False,
    )
    newest = (
        pending.exclude(finished_at=None)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    if newest is None:
        return
    wait = ANNOUNCE_DEBOUNCE_SECONDS - (timezone.now() - newest).total_seconds()
    if wait > 0:
        time.sleep(min(wait, ANNOUNCE_DEBOUNCE_SECONDS))
    with transaction.atomic():
        runs = list(
            pending.select_for_update(skip_locked=True)
            .exclude(finished_at=None)
            .select_related("tenant", "agent", "session")
            .order_by("finished_at")
        )
        if not runs:
            return
        parent = Session.objects.for_tenant(runs[0].tenant).get(pk=parent_session_id)
        blocks = []
        for run in runs:
            name = f" “{run.label}”" if run.label else ""
            body = run.output if run.status == Run.Status.COMPLETED else (run.error or run.status)
            blocks.append(f"[Subagent {run.pk}{name} {run.status}]\n{body}")
        Run.objects.for_tenant(runs[0].tenant).filter(pk__in=[r.pk for r in runs]).update(announced=True)
        if parent.status == Session.Status.ARCHIVED:
            return
        try:  # the follow-up acts as whoever started the subagents, if they still may
            actor = services.run_actor(runs[-1])
        except ServiceError:
            actor = None
        text = "\n\n".join(blocks)
        session_services.message_append(
            actor=actor or Actor.system(parent.tenant),
            session=parent,
            role=SessionMessage.Role.USER,
            content=text,
            name="subagents",
            source="subagent:announce",
            audit=False,
        )
        busy = Run.objects.for_tenant(parent.tenant).filter(session=parent, status__in=ACTIVE).exists()
        if not busy and actor is not None and runs[-1].parent_id is not None:
            follow_up = services.run_create(
                actor=actor,
                agent=parent.agent,
                session_key=parent.key,
                message="Your subagents have reported (see above). Continue with their results.",
                user_id=parent.user_id,
                provider=runs[-1].provider,
            )
            queue(follow_up)


def archive(tenant_id: str | None = None) -> int:
    """Archive subagent runs finished over ``ARCHIVE_AFTER_MINUTES`` ago (all tenants, or one)."""
    cutoff = timezone.now() - timedelta(minutes=ARCHIVE_AFTER_MINUTES)
    runs = Run.objects.dangerously_all_tenants().filter(
        kind=Run.Kind.SUBAGENT, archived_at=None, finished_at__lt=cutoff
    )
    if tenant_id is not None:
        runs = runs.filter(tenant_id=tenant_id)
    return runs.update(archived_at=timezone.now())
