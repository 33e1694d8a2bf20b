"""Starting, cancelling and finishing runs. Every change of a run is published on the tenant's ``runs``
topic after commit; starting and cancelling are audited (the run itself is the record of what it did).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from apps.realtime import events
from apps.runs.models import MAX_INPUT_CHARS, MAX_ITERATIONS, Run
from apps.sessions import services as session_services
from apps.sessions.models import Session
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, ApiKey, Membership

TOPIC = "runs"


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


def run_data(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "agent": run.agent.key,
        "session": str(run.session_id),
        "kind": run.kind,
        "status": run.status,
        "iterations": run.iterations,
        "tool_calls": run.tool_calls,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "error": run.error[:500],
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
) -> Run:
    """A queued run of ``agent`` in its session ``session_key`` (opened when new) answering ``message``."""
    if not isinstance(message, str) or not message.strip():
        raise _invalid("message", "is required: what the agent should answer or do.")
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
    run = Run.objects.create(
        tenant=actor.tenant,
        agent=agent,
        session=session,
        user_id=user_id,
        kind=kind,
        input=message,
        provider=provider,
        max_iterations=max_iterations
        or (20 if kind == Run.Kind.SUBAGENT else Run._meta.get_field("max_iterations").default),
        parent=parent,
        depth=parent.depth + 1 if parent is not None else 0,
        started_by_kind=actor.kind,
        started_by_id=actor.id,
        started_by=actor.label[:300],
    )
    data = run_data(run)
    record(actor=actor, verb="run.created", target_type="run", target_id=str(run.pk), data=data)
    publish(run, "run.created")
    return run


@transaction.atomic
def run_cancel(*, actor: Actor, run: Run) -> Run:
    """Ask a run to stop: a queued run is cancelled at once, a running one at its next step."""
    locked = Run.objects.for_tenant(actor.tenant).select_for_update().get(pk=run.pk)
    if locked.finished:
        raise ServiceError(ErrorCode.CONFLICT, f"the run is already {locked.status}.", status=409)
    locked.cancel_requested = True
    fields = ["cancel_requested", "updated_at"]
    if locked.status == Run.Status.QUEUED:
        locked.status = Run.Status.CANCELLED
        locked.finished_at = timezone.now()
        fields += ["status", "finished_at"]
    locked.save(update_fields=fields)
    record(
        actor=actor, verb="run.cancelled", target_type="run", target_id=str(locked.pk), data=run_data(locked)
    )
    publish(locked, "run.cancel_requested" if locked.status == Run.Status.RUNNING else "run.finished")
    return locked


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
