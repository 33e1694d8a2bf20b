"""The cron tool: an agent manages its own scheduled jobs (``apps.runs.cron``): create, list, update,
delete, enable, disable, run (now, in the background) and history (the last firings)."""

from __future__ import annotations

import uuid
from typing import Any

from apps.runs import cron
from apps.runs.models import CronFiring, CronJob
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult

HISTORY = 10


def _job(ctx: CallContext, args: dict[str, Any]) -> CronJob | ToolResult:
    value = args.get("id")
    if not isinstance(value, str) or not value:
        return ToolResult.error("id is required: the job's id from cron list.")
    jobs = CronJob.objects.for_tenant(ctx.tenant).select_related("agent").filter(agent=ctx.agent)
    try:
        job = jobs.filter(pk=uuid.UUID(value)).first()
    except ValueError:
        job = None
    if job is None:
        job = jobs.filter(name=value).first()
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
            jobs = list(
                CronJob.objects.for_tenant(ctx.tenant)
                .select_related("agent")
                .filter(agent=ctx.agent)
                .order_by("created_at")
            )
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
        firings = list(
            CronFiring.objects.for_tenant(ctx.tenant).filter(job=job).select_related("run")[:HISTORY]
        )
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
