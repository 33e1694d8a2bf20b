"""The agent tools of runs.

- ``cron``: an agent manages its own scheduled jobs (``apps.runs.cron``): create, list, update, delete,
  enable, disable, run (now, in the background) and history (the last firings).
- ``spawn``: subagents, copies of the calling agent working on one task in a session of their own
  (``apps.runs.subagents`` holds their rules and limits): spawn, run, list, cancel and steer.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from apps.runs import cron, runner, selectors, services, subagents
from apps.runs.models import ACTIVE, CronFiring, CronJob, Run
from apps.sessions import selectors as session_selectors
from apps.sessions import services as session_services
from apps.sessions.models import Session
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.tools.catalog import MAX_SPAWN_DEPTH

HISTORY = 10
PREVIEW = 300


def _job(ctx: CallContext, args: dict[str, Any]) -> CronJob | ToolResult:
    value = args.get("id")
    if not isinstance(value, str) or not value:
        return ToolResult.error("id is required: the job's id from cron list.")
    job = selectors.agent_cron_job(tenant=ctx.tenant, agent=ctx.agent, ref=value)
    if job is None:
        return ToolResult.error(f"no job {value[:100]!r} of this agent; cron list shows them.")
    return job


def _line(job: CronJob) -> str:
    state = "enabled" if job.enabled else "disabled"
    if job.kind == "message":
        state += f", sends to {job.channel}" + (f" chat {job.chat_id}" if job.chat_id else "")
    when = f", next {job.next_run_at:%Y-%m-%d %H:%M} UTC" if job.enabled and job.next_run_at else ""
    return (
        f"- {job.pk} “{job.name}”: {job.schedule} ({state}{when}), fired {job.fire_count} times: "
        f"{job.message[:200]}"
    )


@tool("cron")
def cron_tool(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    action = args.get("action")
    try:
        if action == "create":
            schedule, message = args.get("schedule"), args.get("message")
            name = args.get("name") or (message[:60] if isinstance(message, str) else "")
            job = cron.job_create(
                actor=ctx.actor,
                agent=ctx.agent,
                name=str(name).strip() or "job",
                schedule=schedule,  # type: ignore[arg-type]  # validated by the service
                message=message,  # type: ignore[arg-type]
                user_id=ctx.user_id,
                kind=args.get("kind") or "turn",
                channel=args.get("channel") or "",
                chat_id=args.get("chat_id") or "",
            )
            return ToolResult.ok(f"Created job {job.pk}:\n{_line(job)}", id=str(job.pk))
        if action == "list":
            jobs = list(selectors.agent_cron_jobs(tenant=ctx.tenant, agent=ctx.agent))
            if not jobs:
                return ToolResult.ok("This agent has no scheduled jobs.", jobs=[])
            return ToolResult.ok(
                f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}:\n" + "\n".join(_line(j) for j in jobs),
                jobs=[str(j.pk) for j in jobs],
            )
        if action not in ("update", "delete", "enable", "disable", "run", "history"):
            return ToolResult.error(
                "action must be create, list, update, delete, enable, disable, run or history."
            )
        found = _job(ctx, args)
        if isinstance(found, ToolResult):
            return found
        job = found
        if action == "delete":
            cron.job_delete(actor=ctx.actor, job=job)
            return ToolResult.ok(f"Deleted job {job.name!r}.")
        if action in ("enable", "disable", "update"):
            changes: dict[str, Any] = {"enabled": action == "enable"} if action != "update" else {}
            if action == "update":
                for field in ("schedule", "message", "name"):
                    if args.get(field) is not None:
                        changes[field] = args[field]
                if not changes:
                    return ToolResult.error("update needs at least one of schedule, message or name.")
            job = cron.job_update(actor=ctx.actor, job=job, **changes)
            return ToolResult.ok(
                f"Job {action}d:\n{_line(job)}" if action != "update" else f"Job updated:\n{_line(job)}"
            )
        if action == "run":
            firing = cron.fire(str(ctx.tenant.pk), str(job.pk), manual=True, actor=ctx.actor)
            if firing is None or firing.status != CronFiring.Status.STARTED:
                detail = firing.detail if firing is not None else "the job is gone"
                return ToolResult.error(f"job {job.name!r} did not start: {detail}.")
            return ToolResult.ok(
                f"Job {job.name!r} started now (run {firing.run_id}); it works in the background."
            )
        firings = list(selectors.cron_firing_list(tenant=ctx.tenant, job=job)[:HISTORY])
        if not firings:
            return ToolResult.ok(f"Job {job.name!r} has not fired yet.", firings=[])
        lines = [f"The last {len(firings)} firings of {job.name!r}:"]
        for firing in firings:
            outcome = firing.detail or (f"run {firing.run.status}" if firing.run else "")
            if firing.run is not None and firing.run.output:
                outcome += f": {firing.run.output[:200]}"
            how = " (run now)" if firing.manual else ""
            lines.append(f"- {firing.created_at:%Y-%m-%d %H:%M} UTC {firing.status}{how} {outcome}")
        return ToolResult.ok("\n".join(lines), firings=[str(f.pk) for f in firings])
    except ServiceError as error:
        return ToolResult.error(f"cron: {error.message}")


# --- subagents ---------------------------------------------------------------------------------------


def _parent_session(ctx: CallContext) -> Session | ToolResult:
    if not ctx.session_key:
        return ToolResult.error("spawn needs a session: this call has no session key to announce results to.")
    session = session_selectors.session_by_key(tenant=ctx.tenant, agent=ctx.agent, key=ctx.session_key)
    if session is None:
        session, _ = session_services.session_open(
            actor=ctx.actor, agent=ctx.agent, key=ctx.session_key, user_id=ctx.user_id
        )
    return session


def _children(ctx: CallContext, session: Session) -> QuerySet[Run]:
    return selectors.subagent_runs(tenant=ctx.tenant, session=session)


def _refusal(ctx: CallContext, session: Session) -> str | None:
    if ctx.subagent_depth >= MAX_SPAWN_DEPTH:
        return (
            f"a subagent cannot spawn subagents (the maximum depth is {MAX_SPAWN_DEPTH}); do the work "
            "yourself."
        )
    running = _children(ctx, session).filter(status__in=ACTIVE).count()
    if running >= subagents.MAX_CHILDREN:
        return (
            f"this session already has {running}/{subagents.MAX_CHILDREN} subagents at work; wait for one "
            "to finish (list), cancel one, or handle the task yourself."
        )
    busy = selectors.active_subagent_count(tenant=ctx.tenant)
    if busy >= subagents.MAX_CONCURRENT:
        return (
            f"subagents at capacity ({busy}/{subagents.MAX_CONCURRENT} in this tenant); try again later or "
            "do it yourself."
        )
    return None


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
            run = subagents.create(ctx, session, task, str(label)[:200])
            if action == "spawn":
                subagents.queue(run)
    except ServiceError as error:
        return ToolResult.error(f"spawn: {error.message}")
    if action == "spawn":
        return ToolResult.ok(
            f"Spawned subagent {run.pk}{' “' + run.label + '”' if run.label else ''}. It works in the "
            "background; its result will be announced in this session. spawn list shows its progress.",
            id=str(run.pk),
            status=run.status,
        )
    services.run_mark_announced(run=run)
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
        services.run_mark_announced(run=run, announced=False)
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
        time.sleep(subagents.STEER_SETTLE_SECONDS)
    services.run_mark_announced(run=target)  # replaced, not reported
    refused = _refusal(ctx, session)
    if refused:
        return ToolResult.error(refused)
    with transaction.atomic():
        run = subagents.create(ctx, session, message, target.label)
        subagents.queue(run)
    return ToolResult.ok(
        f"Steered: subagent {target.pk} was stopped and {run.pk} now works on the new instructions; its "
        "result will be announced in this session.",
        id=str(run.pk),
        replaced=str(target.pk),
    )
