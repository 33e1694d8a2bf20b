"""Pending exec approvals and allow-always rules: reads, writes, and waiting for a decision.

Writes (each atomic, audited, published on topic ``approvals`` after commit):

* :func:`approval_request`: a call asks; the pending approval is pushed live to the inbox;
* :func:`approval_decide`: allow-once, allow-always (which also stores a rule per command shape) or
  deny; only a pending approval can be decided ("not found or already resolved" otherwise);
* :func:`approval_time_out`: the call stopped waiting, or the approval expired (:data:`EXPIRY_CLOCK`
  for calls that do not wait, the once-a-minute sweep for those whose process stopped);
* :func:`rule_revoke`: the next call of that shape asks again.

A decision also wakes the waiting request, in whatever process it waits: a message to the approval's
own channel-layer group (tenant-prefixed). :func:`wait_for_decision` listens on that group and
re-reads the row every :data:`RECHECK_SECONDS`, so a lost message delays a request but never hangs it.

Expiry is measured on clocks that do not step: ``expires_at`` is set and compared by the database's
clock, and the timers that act at expiry (a waiter, :data:`EXPIRY_CLOCK`) are monotonic. An approval past
``expires_at`` is never decided (409 ``approval_expired``) and reads show it ``timed_out``
(:func:`with_current_status`) even before a process has marked it.

Rules are read by every exec call that needs them (``apps.policy.approvals``), never cached, so
adding or revoking one takes effect on the next call without invalidating any cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connections, transaction
from django.db.models import BooleanField, Case, CharField, ExpressionWrapper, F, Q, QuerySet, Value, When
from django.db.models.functions import Now
from django.dispatch import Signal
from django.http import Http404
from django.utils import timezone

from apps.audit.services import record
from apps.policy.approval_models import ApprovalDecision, ApprovalRule, ApprovalStatus, PendingApproval
from apps.realtime import events
from apps.realtime.events import deliver_after_commit
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import Agent, Tenant

logger = logging.getLogger(__name__)
RECHECK_SECONDS = 2.0
# Sent (inside the transaction) when a call that did not wait has its result: kwargs tenant_id and
# approval_id. A run that waited for the call goes on from it (apps.runs).
call_result_stored = Signal()
MAX_REASON_CHARS = 500


def timeout_seconds() -> float:
    return float(settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS)


def go_duration(seconds: float) -> str:
    """A duration as Go prints it (``2m0s``, ``2s``, ``1m30.5s``, ``500ms``): upstream's message format."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


def timed_out_message(seconds: float) -> str:
    return f"approval timed out after {go_duration(seconds)}"


def group_name(tenant_id: uuid.UUID | str, approval_id: uuid.UUID | str) -> str:
    """The channel-layer group that hears the decision of one approval (tenant-prefixed)."""
    return f"tg.{uuid.UUID(str(tenant_id)).hex}.approval.{uuid.UUID(str(approval_id)).hex}"


# --- reads -------------------------------------------------------------------------------------------


def database_now() -> datetime:
    """The database server's clock: the one clock every process and node shares, so that an
    application host's clock stepping (NTP, skew between nodes) moves no approval's expiry."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT STATEMENT_TIMESTAMP()")
        row = cursor.fetchone()
    return row[0]  # type: ignore[no-any-return]


def with_current_status(queryset: QuerySet[PendingApproval]) -> QuerySet[PendingApproval]:
    """``queryset`` with ``current_status``: ``timed_out`` for an approval past its expiry (by the
    database's clock) that no process has marked yet, the stored status otherwise. Reads show this
    one, so an expired approval is never listed or shown as pending."""
    return queryset.annotate(
        current_status=Case(
            When(status=ApprovalStatus.PENDING, expires_at__lte=Now(), then=Value(ApprovalStatus.TIMED_OUT)),
            default=F("status"),
            output_field=CharField(),
        )
    )


def current_status(approval: PendingApproval) -> str:
    """The status ``approval`` reads with (``current_status`` when read through
    :func:`with_current_status`, the stored one otherwise)."""
    return str(getattr(approval, "current_status", approval.status))


def current_status_is(status: str) -> Q:
    """A filter on the status approvals read with (see :func:`with_current_status`)."""
    if status == ApprovalStatus.PENDING:
        return Q(status=status, expires_at__gt=Now())
    if status == ApprovalStatus.TIMED_OUT:
        return Q(status=status) | Q(status=ApprovalStatus.PENDING, expires_at__lte=Now())
    return Q(status=status)


def approval_list(
    *, tenant: Tenant, status: str | None = None, agent: str | None = None
) -> QuerySet[PendingApproval]:
    queryset = with_current_status(PendingApproval.objects.for_tenant(tenant))
    if status:
        queryset = queryset.filter(current_status_is(status))
    if agent:
        queryset = queryset.filter(agent_key=agent)
    return queryset.order_by("-created_at")


def pending_count(*, tenant: Tenant) -> int:
    return (
        PendingApproval.objects.for_tenant(tenant).filter(current_status_is(ApprovalStatus.PENDING)).count()
    )


def rule_list(
    *, tenant: Tenant, agent: str | None = None, active: bool | None = None
) -> QuerySet[ApprovalRule]:
    queryset = ApprovalRule.objects.for_tenant(tenant).select_related("agent")
    if agent:
        queryset = queryset.filter(agent__key=agent)
    if active is not None:
        queryset = queryset.filter(revoked_at__isnull=active)
    return queryset.order_by("-created_at")


# --- serialisation (API, live events, audit) -----------------------------------------------------------


def approval_data(approval: PendingApproval) -> dict[str, Any]:
    def when(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": str(approval.pk),
        "created_at": when(approval.created_at),
        "expires_at": when(approval.expires_at),
        "decided_at": when(approval.decided_at),
        "agent": approval.agent_key,
        "call_id": approval.call_id,
        "tool": approval.tool,
        "command": approval.command,
        "cwd": approval.cwd,
        "shapes": approval.shapes,
        "reason": approval.reason,
        "package_install": approval.package_install,
        "origin": approval.origin,
        "session_key": approval.session_key,
        "user_id": approval.user_id,
        "requested_by": {
            "kind": approval.requested_by_kind,
            "id": approval.requested_by_id,
            "label": approval.requested_by_label,
        },
        "status": current_status(approval),
        "decision": approval.decision,
        "decided_by": {
            "kind": approval.decided_by_kind,
            "id": approval.decided_by_id,
            "label": approval.decided_by_label,
        }
        if approval.decided_by_kind
        else None,
        "decision_reason": approval.decision_reason,
        "wait": approval.wait,
        "result": approval.result,
    }


def rule_data(rule: ApprovalRule) -> dict[str, Any]:
    return {
        "id": str(rule.pk),
        "created_at": rule.created_at.isoformat() if rule.created_at else None,
        "agent": rule.agent.key,
        "binary_path": rule.binary_path,
        "shape": rule.shape,
        "command": rule.command,
        "source_approval": str(rule.source_id) if rule.source_id else None,
        "created_by": {
            "kind": rule.created_by_kind,
            "id": rule.created_by_id,
            "label": rule.created_by_label,
        },
        "revoked_at": rule.revoked_at.isoformat() if rule.revoked_at else None,
        "revoked_by": {"kind": rule.revoked_by_kind, "id": rule.revoked_by_id, "label": rule.revoked_by_label}
        if rule.revoked_at
        else None,
    }


def _publish(tenant: Tenant, type: str, data: dict[str, Any]) -> None:
    events.publish(tenant=tenant, topic="approvals", type=type, data=data)


def _wake(approval: PendingApproval) -> None:
    """Tell the request waiting for ``approval`` (in any process) that it was resolved, after commit."""
    deliver_after_commit(
        group_name(approval.tenant_id, approval.pk),
        {"type": "approval.resolved", "approval": str(approval.pk), "status": approval.status},
    )


# --- writes --------------------------------------------------------------------------------------------


@transaction.atomic
def approval_request(
    *,
    actor: Actor,
    agent: Agent,
    call_id: str,
    tool: str,
    command: str,
    cwd: str,
    shapes: list[dict[str, Any]],
    reason: str,
    package_install: bool,
    origin: str,
    session_key: str,
    user_id: str,
    wait: bool,
    call_payload: str = "",
) -> PendingApproval:
    """A call asks for approval. ``command`` must already be scrubbed; ``call_payload`` (only for a call
    that does not wait) is what the background run needs, stored encrypted. It expires
    :func:`timeout_seconds` after now by the database's clock; a call that does not wait has it timed
    out then by this process's :data:`EXPIRY_CLOCK` (the waiter of one that waits does it itself)."""
    now = database_now()
    approval = PendingApproval(
        tenant=actor.tenant,
        agent=agent,
        agent_key=agent.key,
        call_id=call_id,
        tool=tool[:200],
        command=command,
        cwd=cwd[:1000],
        shapes=shapes,
        reason=reason[:500],
        package_install=package_install,
        origin=origin[:20],
        session_key=session_key[:200],
        user_id=user_id[:200],
        requested_by_kind=actor.kind,
        requested_by_id=actor.id,
        requested_by_label=actor.label[:300],
        expires_at=now + timedelta(seconds=timeout_seconds()),
        wait=wait,
        call_payload=call_payload,
    )
    approval.save(force_insert=True)
    record(
        actor=actor,
        verb="approval.requested",
        target_type="approval",
        target_id=str(approval.pk),
        data={
            "agent": agent.key,
            "command": command[:1000],
            "reason": approval.reason,
            "origin": approval.origin,  # the caller's, never the request's (apps.runtime.caller)
            "wait": wait,
        },
    )
    _publish(actor.tenant, "approval.requested", approval_data(approval))
    if not wait:
        tenant_id, approval_id = actor.tenant.pk, approval.pk
        transaction.on_commit(lambda: EXPIRY_CLOCK.arm(tenant_id, approval_id, timeout_seconds()))
    return approval


def _not_pending(approval_id: object) -> Conflict:
    return Conflict(
        ErrorCode.CONFLICT,
        f"approval {str(approval_id)!r} not found or already resolved",
    )


def approval_decide(
    *, actor: Actor, approval: PendingApproval, decision: str, reason: str = ""
) -> PendingApproval:
    """Resolve a pending approval. allow-always also stores an allow-always rule for every command of
    it that has a resolved binary (one per binary path and shape, reused when it exists).

    One past its expiry (by the database's clock) is never decided: it is timed out now if no process
    did it yet (its call refused, the inbox told), and the answer is 409 ``approval_expired``. One
    already resolved is 409 ``conflict``, saying how it was resolved."""
    if decision not in ApprovalDecision.values:
        raise ServiceError(
            ErrorCode.INVALID,
            f"decision must be one of {', '.join(ApprovalDecision.values)}",
            details={"decision": [f"Unknown decision {decision!r}."]},
        )
    if len(reason) > MAX_REASON_CHARS:
        raise ServiceError(
            ErrorCode.INVALID,
            f"reason: at most {MAX_REASON_CHARS} characters",
            details={"reason": [f"Ensure this field has no more than {MAX_REASON_CHARS} characters."]},
        )
    with transaction.atomic():
        locked = (
            PendingApproval.objects.for_tenant(actor.tenant)
            .select_for_update(of=("self",))
            .select_related("tenant")
            .annotate(expired=ExpressionWrapper(Q(expires_at__lte=Now()), output_field=BooleanField()))
            .filter(pk=approval.pk)
            .first()
        )
        if locked is None:
            raise _not_pending(approval.pk)
        if locked.status == ApprovalStatus.PENDING and locked.expired:
            _time_out(locked, timezone.now())
        elif locked.status == ApprovalStatus.PENDING:
            return _decide(actor, locked, decision, reason)
    # Outside the block: the time-out above is committed whatever the caller does with the refusal.
    raise resolved_error(locked)


def resolved_error(approval: PendingApproval) -> Conflict:
    """The refusal to decide ``approval``, which is no longer pending: 409 ``approval_expired`` for one
    that expired (marked or not yet), ``conflict`` saying how it was resolved otherwise."""
    if current_status(approval) == ApprovalStatus.TIMED_OUT:
        return Conflict(
            ErrorCode.APPROVAL_EXPIRED,
            f"approval {str(approval.pk)!r} expired at {approval.expires_at.isoformat()} "
            f"({go_duration(timeout_seconds())} without a decision): its call was refused and nothing ran. "
            "The agent may ask again.",
        )
    by = f" by {approval.decided_by_label}" if approval.decided_by_label else ""
    when = approval.decided_at.isoformat() if approval.decided_at else "an earlier time"
    return Conflict(
        ErrorCode.CONFLICT,
        f"approval {str(approval.pk)!r} not found or already resolved: it was "
        f"{approval.get_status_display().lower()}{by} at {when}.",
    )


def _decide(actor: Actor, locked: PendingApproval, decision: str, reason: str) -> PendingApproval:
    tenant = actor.tenant
    now = timezone.now()
    locked.status = ApprovalStatus.DENIED if decision == ApprovalDecision.DENY else ApprovalStatus.ALLOWED
    locked.decision = decision
    locked.decided_by_kind = actor.kind
    locked.decided_by_id = actor.id
    locked.decided_by_label = actor.label[:300]
    locked.decision_reason = reason
    locked.decided_at = now
    locked.save(
        update_fields=[
            "status",
            "decision",
            "decided_by_kind",
            "decided_by_id",
            "decided_by_label",
            "decision_reason",
            "decided_at",
            "updated_at",
        ]
    )
    rules: list[ApprovalRule] = []
    if decision == ApprovalDecision.ALLOW_ALWAYS and locked.agent_id is not None:
        rules = _rules_for(actor=actor, approval=locked)
    record(
        actor=actor,
        verb="approval.decided",
        target_type="approval",
        target_id=str(locked.pk),
        data={
            "agent": locked.agent_key,
            "command": locked.command[:1000],
            "decision": decision,
            "reason": reason,
            "rules": [str(rule.pk) for rule in rules],
        },
    )
    _publish(tenant, "approval.decided", approval_data(locked))
    _wake(locked)
    if not locked.wait:
        _enqueue_run(locked)
    return locked


def _rules_for(*, actor: Actor, approval: PendingApproval) -> list[ApprovalRule]:
    agent_id = approval.agent_id
    assert agent_id is not None
    rules: list[ApprovalRule] = []
    seen: set[tuple[str, str]] = set()
    for item in approval.shapes:
        path, shape = item.get("binary_path"), item.get("shape")
        if not path or not shape or (path, shape) in seen:
            continue
        seen.add((path, shape))
        existing = (
            ApprovalRule.objects.for_tenant(actor.tenant)
            .filter(agent_id=agent_id, binary_path=path, shape=shape, revoked_at__isnull=True)
            .first()
        )
        if existing is not None:
            rules.append(existing)
            continue
        rule = ApprovalRule(
            tenant=actor.tenant,
            agent_id=agent_id,
            binary_path=path,
            shape=shape,
            command=str(item.get("command", ""))[:2000],
            source=approval,
            created_by_kind=actor.kind,
            created_by_id=actor.id,
            created_by_label=actor.label[:300],
        )
        rule.save(force_insert=True)
        record(
            actor=actor,
            verb="approval_rule.created",
            target_type="approval_rule",
            target_id=str(rule.pk),
            data={
                "agent": approval.agent_key,
                "binary_path": path,
                "shape": shape,
                "approval": str(approval.pk),
            },
        )
        _publish(actor.tenant, "approval_rule.created", rule_data(rule))
        rules.append(rule)
    return rules


def _time_out(approval: PendingApproval, now: Any) -> None:
    approval.status = ApprovalStatus.TIMED_OUT
    approval.decided_at = now
    approval.decision_reason = timed_out_message(timeout_seconds())
    approval.save(update_fields=["status", "decided_at", "decision_reason", "updated_at"])
    tenant = approval.tenant
    record(
        actor=Actor.system(tenant),
        verb="approval.timed_out",
        target_type="approval",
        target_id=str(approval.pk),
        data={"agent": approval.agent_key, "command": approval.command[:1000]},
    )
    _publish(tenant, "approval.timed_out", approval_data(approval))
    _wake(approval)
    if not approval.wait:
        _enqueue_run(approval)


@transaction.atomic
def approval_time_out(*, tenant: Tenant, approval_id: uuid.UUID) -> bool:
    """Mark a still-pending approval timed out (the waiting call gave up, or it expired). False when it
    was already resolved."""
    locked = (
        PendingApproval.objects.for_tenant(tenant)
        .select_for_update()
        .select_related("tenant")
        .filter(pk=approval_id, status=ApprovalStatus.PENDING)
        .first()
    )
    if locked is None:
        return False
    _time_out(locked, timezone.now())
    return True


def approval_expire_all() -> int:
    """The expiry sweep: every pending approval past ``expires_at`` (by the database's clock), tenant by
    tenant. Returns how many. It catches those whose process's :data:`EXPIRY_CLOCK` is gone (a restart)."""
    now = Now()
    expired = 0
    tenant_ids = (
        PendingApproval.objects.dangerously_all_tenants()
        .filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    for tenant in Tenant.objects.filter(pk__in=list(tenant_ids)):
        ids = (
            PendingApproval.objects.for_tenant(tenant)
            .filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
            .values_list("pk", flat=True)
        )
        for approval_id in list(ids):
            expired += approval_time_out(tenant=tenant, approval_id=approval_id)
    return expired


class ExpiryClock:
    """Times out, at their expiry, the approvals of this process's calls that do not wait (runs parked
    on one, ``"wait": false`` calls): one daemon thread over a heap of monotonic deadlines, so the inbox
    is told the moment one expires and a clock stepping on this host neither hastens nor delays it.
    The once-a-minute sweep (:func:`approval_expire_all`) catches those of a process that stopped."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, str, str]] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, tenant_id: uuid.UUID | str, approval_id: uuid.UUID | str, seconds: float) -> None:
        with self._wake:
            heapq.heappush(self._heap, (time.monotonic() + seconds, str(tenant_id), str(approval_id)))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="approval-expiry", daemon=True)
                self._thread.start()
            self._wake.notify()

    def pending(self) -> int:
        with self._wake:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._wake.wait(timeout=self._heap[0][0] - time.monotonic() if self._heap else None)
                _, tenant_id, approval_id = heapq.heappop(self._heap)
            try:
                tenant = Tenant.objects.filter(pk=tenant_id).first()
                if tenant is not None:
                    approval_time_out(tenant=tenant, approval_id=uuid.UUID(approval_id))
            except Exception:  # the sweep gets it later; this thread must go on for the others
                logger.exception("could not time out approval %s", approval_id)
            finally:
                release_connections()


EXPIRY_CLOCK = ExpiryClock()


@transaction.atomic
def approval_store_result(*, approval: PendingApproval, result: dict[str, Any]) -> PendingApproval:
    """Keep the outcome of a call that did not wait, and drop what was needed to run it."""
    approval.result = result
    approval.call_payload = ""
    approval.save(update_fields=["result", "call_payload", "updated_at"])
    _publish(approval.tenant, "approval.result", approval_data(approval))
    call_result_stored.send(sender=PendingApproval, tenant_id=approval.tenant_id, approval_id=approval.pk)
    return approval


def _enqueue_run(approval: PendingApproval) -> None:
    from django_q.tasks import async_task

    approval_id, tenant_id = str(approval.pk), str(approval.tenant_id)
    transaction.on_commit(
        lambda: async_task("apps.policy.tasks.run_approved_call", approval_id, tenant_id, group="approvals")
    )


@transaction.atomic
def rule_revoke(*, actor: Actor, rule: ApprovalRule) -> ApprovalRule:
    """Revoke an allow-always rule: the next call of its shape asks again."""
    locked = ApprovalRule.objects.for_tenant(actor.tenant).select_for_update().filter(pk=rule.pk).first()
    if locked is None:
        raise Http404("No approval rule with this id.")
    if locked.revoked_at is not None:
        raise Conflict(ErrorCode.ALREADY_REVOKED, "This approval rule is already revoked.")
    locked.revoked_at = timezone.now()
    locked.revoked_by_kind = actor.kind
    locked.revoked_by_id = actor.id
    locked.revoked_by_label = actor.label[:300]
    locked.save(
        update_fields=["revoked_at", "revoked_by_kind", "revoked_by_id", "revoked_by_label", "updated_at"]
    )
    locked.agent = rule.agent
    record(
        actor=actor,
        verb="approval_rule.revoked",
        target_type="approval_rule",
        target_id=str(locked.pk),
        data={"agent": rule.agent.key, "binary_path": locked.binary_path, "shape": locked.shape},
    )
    _publish(actor.tenant, "approval_rule.revoked", rule_data(locked))
    return locked


# --- waiting -------------------------------------------------------------------------------------------


def _status(tenant: Tenant, approval_id: uuid.UUID) -> str:
    status = (
        PendingApproval.objects.for_tenant(tenant)
        .filter(pk=approval_id)
        .values_list("status", flat=True)
        .first()
    )
    return status or ApprovalStatus.DENIED


def release_connections() -> None:
    """Give this thread's database connections back (to the pool) before a long wait, so waiting calls
    never hold connections that other requests need; one inside a transaction (a test's) stays."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def _status_released(tenant: Tenant, approval_id: uuid.UUID) -> str:
    try:
        return _status(tenant, approval_id)
    finally:
        release_connections()


async def wait_for_decision(*, tenant: Tenant, approval_id: uuid.UUID, timeout: float) -> str:
    """Wait (without holding a database connection, or a thread of its own) until the approval is resolved or
    ``timeout`` seconds have passed; return its status (``pending`` after a timeout).

    Listens on the approval's group for the decision and re-reads the row every
    :data:`RECHECK_SECONDS` (and once right after joining, for a decision that came first)."""
    layer = get_channel_layer()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    read = sync_to_async(_status_released)
    channel = ""
    group = group_name(tenant.pk, approval_id)
    if layer is not None:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
    try:
        while True:
            status = await read(tenant, approval_id)
            if status != ApprovalStatus.PENDING:
                return status
            remaining = deadline - loop.time()
            if remaining <= 0:
                return status
            wait = min(remaining, RECHECK_SECONDS)
            if layer is None:
                await asyncio.sleep(wait)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(layer.receive(channel), timeout=wait)
    finally:
        if layer is not None:
            await layer.group_discard(group, channel)


def wait_for_decision_sync(*, tenant: Tenant, approval_id: uuid.UUID, timeout: float) -> str:
    """:func:`wait_for_decision` for synchronous callers (background jobs): polls the row."""
    deadline = time.monotonic() + timeout
    while True:
        status = _status(tenant, approval_id)
        remaining = deadline - time.monotonic()
        if status != ApprovalStatus.PENDING or remaining <= 0:
            return status
        time.sleep(min(remaining, 0.25))
