"""Starting, cancelling and finishing runs. Every change of a run is published on the tenant's ``runs``
topic after commit; starting and cancelling are audited (the run itself is the record of what it did).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from apps.policy import approval_services
from apps.policy.approval_models import ApprovalStatus, PendingApproval
from apps.realtime import events
from apps.runs.models import ACTIVE, DEFAULT_MAX_ITERATIONS, MAX_INPUT_CHARS, MAX_ITERATIONS, Run
from apps.sessions import services as session_services
from apps.sessions.models import Session
from apps.tenants import quotas
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, ApiKey, Membership
from apps.toolkit import runtime_settings

TOPIC = "runs"
LIVE_INPUT_CHARS = 20_000


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


def run_data(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "agent": run.agent.key,
        "session": str(run.session_id),
        "kind": run.kind,
        "runner": run.runner,
        "status": run.status,
        "session_key": run.session.key,
        "user_id": run.user_id,
        "iterations": run.iterations,
        "tool_calls": run.tool_calls,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "error": run.error[:500],
        "model": run.model,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "awaiting_approval": str(run.awaiting_approval) if run.awaiting_approval else None,
    }


def publish(run: Run, verb: str, **extra: Any) -> None:
    events.publish(tenant=run.tenant, topic=TOPIC, type=verb, data={**run_data(run), **extra})


@transaction.atomic
def run_create(
    *,
    actor: Actor,
    agent: Agent,
    session_key: str,
    message: str,
    user_id: str = "",
    kind: str = Run.Kind.CHAT,
    provider: str = "",
    max_iterations: int | None = None,
    parent: Run | None = None,
    runner: str = Run.Runner.BUILTIN,
) -> Run:
    """A queued run of ``agent`` in its session ``session_key`` (opened when new) answering ``message``."""
    if not isinstance(message, str) or not message.strip():
        raise _invalid("message", "is required: what the agent should answer or do.")
    if runner not in Run.Runner.values:
        raise _invalid("runner", f"one of {', '.join(Run.Runner.values)}.")
    if len(message) > MAX_INPUT_CHARS or "\x00" in message:
        raise _invalid("message", f"at most {MAX_INPUT_CHARS} characters, without NUL.")
    if max_iterations is not None and (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or not 1 <= max_iterations <= MAX_ITERATIONS
    ):
        raise _invalid("max_iterations", f"a whole number from 1 to {MAX_ITERATIONS}.")
    session, _ = session_services.session_open(
        actor=actor,
        agent=agent,
        key=session_key,
        user_id=user_id,
        parent=parent.session if parent is not None else None,
    )
    if session.user_id != user_id:
        raise _invalid("user_id", f"session {session_key!r} belongs to another user.")
    if session.status == Session.Status.ARCHIVED:
        raise ServiceError(ErrorCode.CONFLICT, f"session {session_key!r} is archived.", status=409)
    quotas.lock_tenant(actor.tenant)
    working = Run.objects.for_tenant(actor.tenant).filter(status__in=ACTIVE).count()
    quotas.enforce_count(tenant=actor.tenant, name="concurrent_runs", used=working)
    run = Run.objects.create(
        tenant=actor.tenant,
        agent=agent,
        session=session,
        user_id=user_id,
        kind=kind,
        runner=runner,
        input=message,
        provider=provider,
        max_iterations=max_iterations or DEFAULT_MAX_ITERATIONS,
        parent=parent,
        depth=parent.depth + 1 if parent is not None else 0,
        started_by_kind=actor.kind,
        started_by_id=actor.id,
        started_by=actor.label[:300],
    )
    data = run_data(run)
    record(actor=actor, verb="run.created", target_type="run", target_id=str(run.pk), data=data)
    # An external runner takes the run from this event: it carries the input (bounded; GET has it all).
    publish(run, "run.created", input=run.input[:LIVE_INPUT_CHARS], max_iterations=run.max_iterations)
    return run


def runner_for(agent: Agent) -> str:
    """Who runs the turns Toolgate starts for ``agent`` (subagents, scheduled jobs): its runtime setting."""

    settings = runtime_settings.effective(agent.tenant.settings or {}, agent.settings or {})
    return str(settings.get("runner") or Run.Runner.EXTERNAL)


def _lock(actor: Actor, run: Run) -> Run:
    """The run again, locked for this transaction."""
    return (
        Run.objects.for_tenant(actor.tenant)
        .select_for_update()
        .select_related("agent", "session")
        .get(pk=run.pk)
    )


def _external(run: Run, status: str) -> Run:
    if run.runner != Run.Runner.EXTERNAL:
        raise ServiceError(
            ErrorCode.CONFLICT, "the built-in runner runs this run; it cannot be claimed.", status=409
        )
    if run.status != status:
        raise ServiceError(ErrorCode.CONFLICT, f"the run is {run.status}, not {status}.", status=409)
    return run


@transaction.atomic
def run_claim(*, actor: Actor, run: Run) -> Run:
    """An external runner takes a queued run: it is now running (once: a second claim is 409)."""
    locked = _external(_lock(actor, run), Run.Status.QUEUED)
    locked.status = Run.Status.RUNNING
    locked.started_at = timezone.now()
    locked.save(update_fields=["status", "started_at", "updated_at"])
    record(
        actor=actor, verb="run.claimed", target_type="run", target_id=str(locked.pk), data=run_data(locked)
    )
    publish(locked, "run.started")
    return locked


@transaction.atomic
def run_finish(
    *,
    actor: Actor,
    run: Run,
    status: str,
    output: str = "",
    error: str = "",
    iterations: int = 0,
    tool_calls: int = 0,
    input_tokens: int = 0,
    output_tokens: int = 0,
    model: str = "",
) -> Run:
    """An external runner reports the end of the run it claimed."""
    locked = _external(_lock(actor, run), Run.Status.RUNNING)
    ends = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
    if status not in ends:
        raise _invalid("status", f"one of {', '.join(ends)}.")
    for field, text in (("output", output), ("error", error)):
        if not isinstance(text, str) or len(text) > MAX_INPUT_CHARS or "\x00" in text:
            raise _invalid(field, f"at most {MAX_INPUT_CHARS} characters, without NUL.")
    for field, value in (
        ("iterations", iterations),
        ("tool_calls", tool_calls),
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000_000:
            raise _invalid(field, "a whole number from 0 to 10000000.")
    if not isinstance(model, str) or len(model) > 200:
        raise _invalid("model", "at most 200 characters.")
    if iterations > MAX_ITERATIONS:
        raise _invalid("iterations", f"at most {MAX_ITERATIONS}.")
    locked.status = status
    locked.output, locked.error, locked.model = output, error, model
    locked.iterations, locked.tool_calls = iterations, tool_calls
    locked.input_tokens, locked.output_tokens = input_tokens, output_tokens
    locked.finished_at = timezone.now()
    locked.save()
    record(
        actor=actor, verb="run.finished", target_type="run", target_id=str(locked.pk), data=run_data(locked)
    )
    publish(locked, "run.finished")
    from apps.runs import subagents

    subagents.finished(locked)
    return locked


def run_message_append(*, actor: Actor, run: Run, **fields: Any) -> Any:
    """An external runner adds a message of the run it works to the run's session: the run's transcript
    (``source`` ``run:<id>``, as the built-in runner's messages). Only while the run is running."""
    if run.runner != Run.Runner.EXTERNAL:
        raise ServiceError(
            ErrorCode.CONFLICT, "the built-in runner writes this run's transcript itself.", status=409
        )
    if run.status != Run.Status.RUNNING:
        raise ServiceError(
            ErrorCode.CONFLICT,
            f"the run is {run.status}: claim it first, and add messages before reporting its end.",
            status=409,
        )
    return session_services.message_append(
        actor=actor, session=run.session, source=f"run:{run.pk}", audit=False, **fields
    )


@transaction.atomic
def run_cancel(*, actor: Actor, run: Run) -> Run:
    """Ask a run to stop: a queued run, or one waiting for an approval, is cancelled at once (the
    approval it waited for is denied: its call never runs), a running one at its next step."""
    locked = _lock(actor, run)
    if locked.finished:
        raise ServiceError(ErrorCode.CONFLICT, f"the run is already {locked.status}.", status=409)
    locked.cancel_requested = True
    fields = ["cancel_requested", "updated_at"]
    awaited = locked.awaiting_approval if locked.status == Run.Status.WAITING else None
    if locked.status in (Run.Status.QUEUED, Run.Status.WAITING):
        locked.status = Run.Status.CANCELLED
        locked.error = "cancelled"
        locked.finished_at = timezone.now()
        locked.awaiting_approval, locked.pending_calls = None, []
        fields += ["status", "error", "finished_at", "awaiting_approval", "pending_calls"]
    locked.save(update_fields=fields)
    if awaited is not None:
        withdraw_approval(actor, awaited)
    record(
        actor=actor, verb="run.cancelled", target_type="run", target_id=str(locked.pk), data=run_data(locked)
    )
    publish(locked, "run.cancel_requested" if locked.status == Run.Status.RUNNING else "run.finished")
    if locked.finished:
        from apps.runs import subagents

        subagents.finished(locked)
    return locked


def withdraw_approval(actor: Actor, approval_id: Any) -> None:
    """Deny the approval a cancelled run waited for, if nobody decided it yet."""
    approval = (
        PendingApproval.objects.for_tenant(actor.tenant)
        .filter(pk=approval_id, status=ApprovalStatus.PENDING)
        .first()
    )
    if approval is None:
        return
    try:
        approval_services.approval_decide(
            actor=Actor.system(actor.tenant),
            approval=approval,
            decision="deny",
            reason="the run that asked for it was cancelled",
        )
    except ServiceError:  # decided meanwhile: its result finds the run cancelled and goes no further
        return


def run_mark_announced(*, run: Run, announced: bool = True) -> None:
    """Record whether the subagent run's result still has to be announced to its parent's session (a
    result returned in the call, or a run replaced by steering, is not announced)."""
    Run.objects.for_tenant(run.tenant).filter(pk=run.pk).update(announced=announced)
    run.announced = announced


def run_actor(run: Run) -> Actor:
    """The actor the run's tool calls act as: whoever started it, with their role now. A revoked key or
    a removed member cannot act any more: ServiceError."""
    tenant = run.tenant
    if run.started_by_kind == "api_key":
        key = ApiKey.objects.for_tenant(tenant).filter(pk=run.started_by_id).first()
        if key is None or key.revoked_at is not None or (key.expires_at and key.expires_at <= timezone.now()):
            raise ServiceError(
                ErrorCode.PERMISSION_DENIED,
                "the API key that started this run is no longer valid.",
                status=403,
            )
        return Actor(tenant=tenant, role=key.role, kind="api_key", api_key=key)
    if run.started_by_kind == "user":
        membership = (
            Membership.objects.for_tenant(tenant)
            .select_related("user")
            .filter(user_id=run.started_by_id)
            .first()
        )
        if membership is None:
            raise ServiceError(
                ErrorCode.PERMISSION_DENIED,
                "the member who started this run has left the tenant.",
                status=403,
            )
        return Actor(tenant=tenant, role=membership.role, kind="user", user=membership.user)
    return Actor.system(tenant)
