"""Subagents: copies of the calling agent that work on one task in a session of their own (the parent's
key + ``:sub:<id>``), started with the ``spawn`` tool.

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

import contextlib
import time
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from apps.runs import runner, services
from apps.runs.models import ACTIVE, Run
from apps.sessions import services as session_services
from apps.sessions.models import Session, SessionMessage
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.tools.catalog import MAX_SPAWN_DEPTH

MAX_CONCURRENT = 8
MAX_CHILDREN = 5
SUBAGENT_ITERATIONS = 20
ARCHIVE_AFTER_MINUTES = 60
STEER_SETTLE_SECONDS = 0.5
ANNOUNCE_DEBOUNCE_SECONDS = 1.0
PREVIEW = 300


def _parent_session(ctx: CallContext) -> Session | ToolResult:
    if not ctx.session_key:
        return ToolResult.error("spawn needs a session: this call has no session key to announce results to.")
    session = Session.objects.for_tenant(ctx.tenant).filter(agent=ctx.agent, key=ctx.session_key).first()
    if session is None:
        session, _ = session_services.session_open(
            actor=ctx.actor, agent=ctx.agent, key=ctx.session_key, user_id=ctx.user_id
        )
    return session


def _children(ctx: CallContext, session: Session) -> Any:
    return (
        Run.objects.for_tenant(ctx.tenant)
        .filter(kind=Run.Kind.SUBAGENT, session__parent=session)
        .select_related("session", "agent")
    )


def _refusal(ctx: CallContext, session: Session) -> str | None:
    if ctx.subagent_depth >= MAX_SPAWN_DEPTH:
        return (
            f"a subagent cannot spawn subagents (the maximum depth is {MAX_SPAWN_DEPTH}); do the work "
            "yourself."
        )
    running = _children(ctx, session).filter(status__in=ACTIVE).count()
    if running >= MAX_CHILDREN:
        return (
            f"this session already has {running}/{MAX_CHILDREN} subagents at work; wait for one to finish "
            "(list), cancel one, or handle the task yourself."
        )
    busy = Run.objects.for_tenant(ctx.tenant).filter(kind=Run.Kind.SUBAGENT, status__in=ACTIVE).count()
    if busy >= MAX_CONCURRENT:
        return (
            f"subagents at capacity ({busy}/{MAX_CONCURRENT} in this tenant); try again later or do it "
            "yourself."
        )
    return None


def _create(ctx: CallContext, session: Session, task: str, label: str) -> Run:
    parent_run = (
        Run.objects.for_tenant(ctx.tenant)
        .filter(session=session, status=Run.Status.RUNNING)
        .order_by("-created_at")
        .first()
    )
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


def _queue(run: Run) -> None:
    """A worker runs it (an external run waits for its runner to claim it)."""
    if run.runner != Run.Runner.BUILTIN:
        return
    tenant_id, run_id = str(run.tenant_id), str(run.pk)
    transaction.on_commit(lambda: async_task("apps.runs.tasks.execute_run", tenant_id, run_id))


def _describe(run: Run) -> str:
    name = f" “{run.label}”" if run.label else ""
    line = f"- {run.pk}{name}: {run.status}, {run.iterations} iterations, task: {run.input[:PREVIEW]}"
    if run.output:
        line += f"\n  result: {run.output[:PREVIEW]}{'…' if len(run.output) > PREVIEW else ''}"
    if run.error and run.status != Run.Status.CANCELLED:
        line += f"\n  error: {run.error[:PREVIEW]}"
    return line


def _task(args: dict[str, Any], field: str) -> str | ToolResult:
    value = args.get(field)
    if not isinstance(value, str) or not value.strip():
        return ToolResult.error(f"{field} is required: what the subagent should do.")
    return value


@tool("spawn")
def spawn(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    action = args.get("action") or "spawn"
    session = _parent_session(ctx)
    if isinstance(session, ToolResult):
        return session
    if action == "list":
        return _list(ctx, session)
    if action == "cancel":
        return _cancel(ctx, session, args.get("id"))
    if action == "steer":
        return _steer(ctx, session, args)
    if action not in ("spawn", "run"):
        return ToolResult.error("action must be spawn, run, list, cancel or steer.")
    task = _task(args, "task")
    if isinstance(task, ToolResult):
        return task
    label = args.get("label") if isinstance(args.get("label"), str) else ""
    refused = _refusal(ctx, session)
    if refused:
        return ToolResult.error(refused)
    try:
        with transaction.atomic():
            run = _create(ctx, session, task, str(label)[:200])
            if action == "spawn":
                _queue(run)
    except ServiceError as error:
        return ToolResult.error(f"spawn: {error.message}")
    if action == "spawn":
        return ToolResult.ok(
            f"Spawned subagent {run.pk}{' “' + run.label + '”' if run.label else ''}. It works in the "
            "background; its result will be announced in this session. spawn list shows its progress.",
            id=str(run.pk),
            status=run.status,
        )
    Run.objects.for_tenant(ctx.tenant).filter(pk=run.pk).update(announced=True)
    if run.runner != Run.Runner.BUILTIN:
        return ToolResult.ok(
            f"Subagent {run.pk} is queued for this agent's external runner, which runs it; spawn list shows "
            "its progress.",
            id=str(run.pk),
            status=run.status,
        )
    runner.execute(run.pk, run.tenant_id)
    run.refresh_from_db()
    if run.status == Run.Status.WAITING:  # its result is announced once the approval is decided
        Run.objects.for_tenant(ctx.tenant).filter(pk=run.pk).update(announced=False)
        return ToolResult.ok(
            f"Subagent {run.pk} waits for a human's approval of a tool call. Its result will be announced "
            "in this session; spawn list shows its progress.",
            id=str(run.pk),
            status=run.status,
        )
    if run.status != Run.Status.COMPLETED:
        return ToolResult.error(f"subagent {run.pk} {run.status}: {run.error or 'no answer'}", id=str(run.pk))
    return ToolResult.ok(
        f"Subagent {run.pk} finished ({run.iterations} iterations, {run.tool_calls} tool calls):\n\n"
        + run.output,
        id=str(run.pk),
        status=run.status,
    )


def _list(ctx: CallContext, session: Session) -> ToolResult:
    runs = list(_children(ctx, session).filter(archived_at__isnull=True).order_by("created_at"))
    if not runs:
        return ToolResult.ok("No subagents in this session.", subagents=[])
    lines = [f"{len(runs)} subagent{'s' if len(runs) != 1 else ''} of this session:"]
    lines += [_describe(run) for run in runs]
    return ToolResult.ok(
        "\n".join(lines), subagents=[{"id": str(r.pk), "status": r.status, "label": r.label} for r in runs]
    )


def _cancel(ctx: CallContext, session: Session, which: Any) -> ToolResult:
    active = _children(ctx, session).filter(status__in=ACTIVE).order_by("created_at")
    if which == "all":
        targets = list(active)
    elif which == "last":
        targets = list(active.order_by("-created_at")[:1])
    elif isinstance(which, str) and which:
        try:
            uuid.UUID(which)
        except ValueError:
            return ToolResult.error(
                f"no subagent {which[:64]!r} here; give an id from spawn list, all or last."
            )
        target = _children(ctx, session).filter(pk=which).first()
        if target is None:
            return ToolResult.error(
                f"no subagent {which[:64]!r} here; give an id from spawn list, all or last."
            )
        if target.finished:
            return ToolResult.error(f"subagent {which} is already {target.status}.")
        targets = [target]
    else:
        return ToolResult.error("id is required: a subagent's id from spawn list, all or last.")
    if not targets:
        return ToolResult.ok("No subagent of this session is at work; nothing to cancel.", cancelled=[])
    cancelled = []
    for run in targets:
        try:
            services.run_cancel(actor=ctx.actor, run=run)
        except ServiceError:
            continue  # it finished meanwhile
        cancelled.append(str(run.pk))
    return ToolResult.ok(
        f"Cancelled {len(cancelled)} subagent{'s' if len(cancelled) != 1 else ''}: {', '.join(cancelled)}.",
        cancelled=cancelled,
    )


def _steer(ctx: CallContext, session: Session, args: dict[str, Any]) -> ToolResult:
    message = _task(args, "message")
    if isinstance(message, ToolResult):
        return message
    which = args.get("id")
    if not isinstance(which, str) or which in ("", "all", "last"):
        return ToolResult.error("steer needs the id of one subagent (see spawn list).")
    try:
        uuid.UUID(which)
    except ValueError:
        return ToolResult.error(f"no subagent {which[:64]!r} here; give an id from spawn list.")
    target = _children(ctx, session).filter(pk=which).first()
    if target is None:
        return ToolResult.error(f"no subagent {which[:64]!r} here; give an id from spawn list.")
    if not target.finished:
        with contextlib.suppress(ServiceError):  # it finished meanwhile: respawn all the same
            services.run_cancel(actor=ctx.actor, run=target)
        time.sleep(STEER_SETTLE_SECONDS)
    Run.objects.for_tenant(ctx.tenant).filter(pk=target.pk).update(announced=True)  # replaced, not reported
    refused = _refusal(ctx, session)
    if refused:
        return ToolResult.error(refused)
    with transaction.atomic():
        run = _create(ctx, session, message, target.label)
        _queue(run)
    return ToolResult.ok(
        f"Steered: subagent {target.pk} was stopped and {run.pk} now works on the new instructions; its "
        "result will be announced in this session.",
        id=str(run.pk),
        replaced=str(target.pk),
    )


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
            _queue(follow_up)


def archive(tenant_id: str | None = None) -> int:
    """Archive subagent runs finished over ``ARCHIVE_AFTER_MINUTES`` ago (all tenants, or one)."""
    cutoff = timezone.now() - timedelta(minutes=ARCHIVE_AFTER_MINUTES)
    runs = Run.objects.dangerously_all_tenants().filter(
        kind=Run.Kind.SUBAGENT, archived_at=None, finished_at__lt=cutoff
    )
    if tenant_id is not None:
        runs = runs.filter(tenant_id=tenant_id)
    return runs.update(archived_at=timezone.now())
