"""Scheduled jobs of agents (the ``cron`` tool and ``/api/v1/cron/``) on django-q2 schedules.

A job's ``schedule`` is a five-field cron expression (``*/15 9-17 * * 1-5``, checked with croniter) or an
interval, ``every <n>m`` / ``every <n>h`` (at least ``MIN_INTERVAL_MINUTES``). Each job owns one
django-q2 ``Schedule`` named ``cron:<job id>`` whose arguments name the tenant and the job explicitly;
disabling a job removes its schedule, enabling it creates a new one. When a ``turn`` job fires
(:func:`fire`), a run of the agent starts with the job's message in the session ``cron:<job id>``, unless
the previous run of the job is still at work (the firing is then recorded as skipped); a ``message`` job
sends its message to its channel (one the agent may use) and records the delivery. Every change is audited and
published on the ``runs`` topic.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from apps.audit.services import record_and_publish
from apps.messaging import selectors as messaging
from apps.messaging import services as messaging_services
from apps.messaging.models import MAX_TEXT_CHARS
from apps.messaging.senders import Outgoing
from apps.messaging.validation import chat_id_error
from apps.runs import runner, services
from apps.runs.models import ACTIVE, CronFiring, CronJob, Run
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent

MIN_INTERVAL_MINUTES = 1
MAX_JOBS_PER_AGENT = 50
MAX_MESSAGE_CHARS = 20_000
MAX_NAME_CHARS = 100
FUNC = "apps.runs.tasks.fire_cron"
_INTERVAL = re.compile(r"^every\s+(\d{1,5})\s*(m|min|minutes?|h|hours?)$", re.IGNORECASE)


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


def parse_schedule(value: Any) -> dict[str, Any]:
    """The django-q2 schedule fields of ``value``; ServiceError on ``schedule`` otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise _invalid(
            "schedule", "is required: a cron expression (e.g. 0 9 * * 1-5) or every <n>m / every <n>h."
        )
    text = " ".join(value.split())
    interval = _INTERVAL.match(text)
    if interval:
        minutes = int(interval.group(1)) * (60 if interval.group(2).lower().startswith("h") else 1)
        if not MIN_INTERVAL_MINUTES <= minutes <= 60 * 24 * 31:
            raise _invalid("schedule", f"an interval from {MIN_INTERVAL_MINUTES} minute to 31 days.")
        return {"schedule_type": Schedule.MINUTES, "minutes": minutes, "cron": None}
    from croniter import croniter

    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise _invalid(
            "schedule", f"{text[:100]!r} is neither a five-field cron expression nor every <n>m / every <n>h."
        )
    return {"schedule_type": Schedule.CRON, "cron": text, "minutes": None}


def _text(field: str, value: Any, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _invalid(field, "is required.")
    if len(value) > limit or "\x00" in value:
        raise _invalid(field, f"at most {limit} characters, without NUL.")
    return value


def _delivery(actor: Actor, agent: Agent, kind: str, channel: str, chat_id: str, message: str) -> None:
    """A message job names a channel the agent may use, a chat (or the channel's default) and a message
    the channel can carry; a turn job names no channel."""
    if kind not in CronJob.Kind.values:
        raise _invalid("kind", f"one of {', '.join(CronJob.Kind.values)}.")
    if kind == CronJob.Kind.TURN:
        if channel or chat_id:
            raise _invalid("channel", "only a message job sends to a channel.")
        return
    found = messaging.channel_by_name(tenant=actor.tenant, name=channel) if isinstance(channel, str) else None
    if found is None:
        raise _invalid("channel", f"no channel {str(channel)[:64]!r} in this tenant (see Channels).")
    if not found.allows_agent(agent.key):
        raise _invalid("channel", f"the agent {agent.key} may not use the channel {found.name}.")
    target = chat_id or found.default_chat_id
    if not target:
        raise _invalid("chat_id", f"required: the channel {found.name} has no default chat.")
    problem = chat_id_error(target, found.kind)
    if problem:
        raise _invalid("chat_id", problem)
    if len(message) > MAX_TEXT_CHARS:
        raise _invalid("message", f"a channel message is at most {MAX_TEXT_CHARS} characters.")


def _send(job: CronJob, actor: Actor, manual: bool) -> CronFiring:
    """Deliver a message job's text to its channel, recorded as a firing (failed with the reason)."""
    tenant = job.tenant
    channel = messaging.channel_by_name(tenant=tenant, name=job.channel)
    problem = ""
    if channel is None:
        problem = f"the channel {job.channel} no longer exists"
    elif not channel.enabled:
        problem = f"the channel {job.channel} is disabled"
    elif not channel.allows_agent(job.agent.key):
        problem = f"the agent may no longer use the channel {job.channel}"
    if channel is None or problem:
        return CronFiring.objects.create(
            tenant=tenant, job=job, status=CronFiring.Status.FAILED, manual=manual, detail=problem[:500]
        )
    outgoing = Outgoing(
        chat_id=job.chat_id or channel.default_chat_id,
        text=job.message,
        agent=job.agent.key,
        session_key=f"cron:{job.pk}",
        user_id=job.user_id,
    )
    try:
        outcome = messaging_services.send_message(actor=actor, channel=channel, outgoing=outgoing)
    except ServiceError as error:
        detail, ok = error.message, False
    else:
        ok = outcome.ok
        detail = f"sent to {channel.name}" if ok else f"not sent: {outcome.message.error}"
    return CronFiring.objects.create(
        tenant=tenant,
        job=job,
        status=CronFiring.Status.STARTED if ok else CronFiring.Status.FAILED,
        manual=manual,
        detail=detail[:500],
    )


def job_data(job: CronJob) -> dict[str, Any]:
    return {
        "id": str(job.pk),
        "agent": job.agent.key,
        "name": job.name,
        "schedule": job.schedule,
        "enabled": job.enabled,
        "next_run_at": job.next_run_at.isoformat() if job.next_run_at else None,
    }


def _sync_schedule(job: CronJob) -> None:
    """Create, update or remove the job's django-q2 schedule to match it."""
    existing = Schedule.objects.filter(pk=job.q_schedule_id).first() if job.q_schedule_id else None
    if not job.enabled:
        if existing is not None:
            existing.delete()
        job.q_schedule_id, job.next_run_at = None, None
        return
    fields = parse_schedule(job.schedule)
    if existing is None:
        existing = Schedule(name=f"cron:{job.pk}", func=FUNC, repeats=-1)
    existing.args = repr((str(job.tenant_id), str(job.pk)))
    existing.schedule_type = fields["schedule_type"]
    existing.cron = fields["cron"]
    existing.minutes = fields["minutes"]
    existing.next_run = None
    existing.next_run = existing.calculate_next_run(timezone.now())
    existing.save()
    job.q_schedule_id, job.next_run_at = existing.pk, existing.next_run


@transaction.atomic
def job_create(
    *,
    actor: Actor,
    agent: Agent,
    name: str,
    schedule: str,
    message: str,
    user_id: str = "",
    enabled: bool = True,
    kind: str = CronJob.Kind.TURN,
    channel: str = "",
    chat_id: str = "",
) -> CronJob:
    _text("name", name, MAX_NAME_CHARS)
    parse_schedule(schedule)
    _text("message", message, MAX_MESSAGE_CHARS)
    _delivery(actor, agent, kind, channel, chat_id, message)
    if len(user_id) > 200 or "\x00" in user_id:
        raise _invalid("user_id", "at most 200 characters.")
    jobs = CronJob.objects.for_tenant(actor.tenant).filter(agent=agent)
    if jobs.count() >= MAX_JOBS_PER_AGENT:
        raise ServiceError(
            ErrorCode.CONFLICT, f"the agent has {MAX_JOBS_PER_AGENT} jobs, the most it may have.", status=409
        )
    if jobs.filter(name=name).exists():
        raise ServiceError(ErrorCode.CONFLICT, f"the agent already has a job named {name!r}.", status=409)
    job = CronJob.objects.create(
        tenant=actor.tenant,
        agent=agent,
        name=name,
        schedule=" ".join(schedule.split()),
        message=message,
        user_id=user_id,
        enabled=enabled,
        kind=kind,
        channel=channel,
        chat_id=chat_id,
        created_by=actor.label[:300],
    )
    _sync_schedule(job)
    job.save(update_fields=["q_schedule_id", "next_run_at", "updated_at"])
    record_and_publish(
        actor=actor,
        topic=services.TOPIC,
        verb="cron.created",
        target_type="cron_job",
        target_id=str(job.pk),
        data=job_data(job),
    )
    return job


@transaction.atomic
def job_update(
    *,
    actor: Actor,
    job: CronJob,
    name: str | None = None,
    schedule: str | None = None,
    message: str | None = None,
    enabled: bool | None = None,
) -> CronJob:
    job = CronJob.objects.for_tenant(actor.tenant).select_for_update().select_related("agent").get(pk=job.pk)
    if name is not None:
        _text("name", name, MAX_NAME_CHARS)
        if (
            CronJob.objects.for_tenant(actor.tenant)
            .filter(agent=job.agent, name=name)
            .exclude(pk=job.pk)
            .exists()
        ):
            raise ServiceError(ErrorCode.CONFLICT, f"the agent already has a job named {name!r}.", status=409)
        job.name = name
    if schedule is not None:
        parse_schedule(schedule)
        job.schedule = " ".join(schedule.split())
    if message is not None:
        job.message = _text("message", message, MAX_MESSAGE_CHARS)
        _delivery(actor, job.agent, job.kind, job.channel, job.chat_id, job.message)
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise _invalid("enabled", "true or false.")
        job.enabled = enabled
    _sync_schedule(job)
    job.save()
    record_and_publish(
        actor=actor,
        topic=services.TOPIC,
        verb="cron.updated",
        target_type="cron_job",
        target_id=str(job.pk),
        data=job_data(job),
    )
    return job


@transaction.atomic
def job_delete(*, actor: Actor, job: CronJob) -> None:
    if job.q_schedule_id:
        Schedule.objects.filter(pk=job.q_schedule_id).delete()
    data_job = job
    record_and_publish(
        actor=actor,
        topic=services.TOPIC,
        verb="cron.deleted",
        target_type="cron_job",
        target_id=str(data_job.pk),
        data=job_data(data_job),
    )
    job.delete()


def fire(
    tenant_id: str, job_id: str, *, manual: bool = False, actor: Actor | None = None
) -> CronFiring | None:
    """The job's time has come (or someone ran it now): start its run, recorded as a firing."""
    job = (
        CronJob.objects.dangerously_all_tenants()
        .select_related("tenant", "agent")
        .filter(pk=job_id, tenant_id=tenant_id)
        .first()
    )
    if job is None or (not job.enabled and not manual):
        return None
    tenant = job.tenant
    if not tenant.is_active:
        # A suspended tenant's schedules stay, and are skipped until it is resumed.
        return CronFiring.objects.create(
            tenant=tenant,
            job=job,
            status=CronFiring.Status.SKIPPED,
            manual=manual,
            detail="the tenant is suspended",
        )
    session_key = f"cron:{job.pk}"
    CronJob.objects.for_tenant(tenant).filter(pk=job.pk).update(
        last_fired_at=timezone.now(),
        fire_count=F("fire_count") + 1,
        next_run_at=Schedule.objects.filter(pk=job.q_schedule_id).values_list("next_run", flat=True).first(),
    )
    if job.kind == CronJob.Kind.MESSAGE:
        return _send(job, actor or Actor.system(tenant), manual)
    with transaction.atomic():
        busy = Run.objects.for_tenant(tenant).filter(
            session__key=session_key, agent=job.agent, status__in=ACTIVE
        )
        working = busy.first()
        if working is not None:
            firing = CronFiring.objects.create(
                tenant=tenant,
                job=job,
                status=CronFiring.Status.SKIPPED,
                manual=manual,
                detail="the previous run of this job is still at work",
            )
        else:
            try:
                run = services.run_create(
                    actor=actor or Actor.system(tenant),
                    agent=job.agent,
                    session_key=session_key,
                    message=job.message,
                    user_id=job.user_id,
                    kind=Run.Kind.CRON,
                    runner=services.runner_for(job.agent),
                )
            except ServiceError as error:
                return CronFiring.objects.create(
                    tenant=tenant,
                    job=job,
                    status=CronFiring.Status.FAILED,
                    manual=manual,
                    detail=error.message[:500],
                )
            firing = CronFiring.objects.create(
                tenant=tenant, job=job, status=CronFiring.Status.STARTED, run=run, manual=manual
            )
    if working is not None:
        if not manual and working.status == Run.Status.RUNNING:
            # This is a worker: a run whose worker stopped in the middle of it (this job delivered
            # again after its worker was killed) is taken over once its lease expired; a run a worker
            # holds is left alone.
            runner.execute(working.pk, working.tenant_id)
        return firing
    if run.runner != Run.Runner.BUILTIN:  # the agent's external runner claims it from the runs topic
        return firing
    if manual:  # started by a person or a tool call: a worker runs it
        tenant_key, run_key = str(run.tenant_id), str(run.pk)
        transaction.on_commit(lambda: async_task("apps.runs.tasks.execute_run", tenant_key, run_key))
    else:  # the schedule fired: this is already a worker
        runner.execute(run.pk, run.tenant_id)
    return firing
