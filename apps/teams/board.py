"""The task board's state machine (SPEC B §2.2, §2.3, §2.5, §2.6, with SPEC Part A's fixes).

Every status change is one conditional UPDATE guarded by the expected status and scoped to the task's
team and tenant (``WHERE id=… AND status IN (…) AND team_id=… AND tenant_id=…``); zero rows means the
task was not in that state (or is not on this team's board), and the caller gets a message a model can
act on. Numbering per (team, chat) runs under a lock on the team row. A terminal transition (completed,
failed, cancelled, and rejected) unblocks the tasks waiting on it in the same transaction. Each change
writes its ``TaskEvent`` (B §2.6's types and data, plus ``deleted``, ``attachment_added``, and the
``recovered``/``unblocked``/``retried`` steps the ticker and humans take) and publishes a live event on
the team's topic ``team:<team id>`` after commit.

Part A's fixes of upstream behaviour, on purpose:

* the assignee is optional on create: an unassigned pending task is claimable by any member;
* approving a ``require_approval`` task that never ran makes it ``pending`` (``blocked`` while it still
  has open blockers) — the work has yet to happen; approving reviewed work completes it;
* a completed task can be retried (reset to pending);
* ``update`` honours ``priority`` and never changes a status;
* a blocker comment on an in-progress task really fails it, and that failure unblocks dependents.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import F, Max, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from apps.realtime import events
from apps.teams import hooks, team_settings
from apps.teams.models import Escalation, Task, TaskAttachment, TaskComment, TaskEvent, Team, TeamMember

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

Status = Task.Status
EventType = TaskEvent.Type

LOCK_DURATION = timedelta(minutes=60)
STALE_PENDING_AFTER = timedelta(hours=2)
STALE_IN_REVIEW_AFTER = timedelta(hours=4)
REASON_MAX_CHARS = 500
# New instructions a human gives with a retry; they go to the member whole, with the dispatch.
INSTRUCTIONS_MAX_CHARS = 4000
COMMENT_MAX_BYTES = 10_000
PREVIEW_CHARS = 500
SUBJECT_MAX = 500
DESCRIPTION_MAX = 100_000
RESULT_MAX = 100_000
TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
RETRYABLE = (Status.STALE, Status.FAILED, Status.CANCELLED, Status.IN_REVIEW, Status.COMPLETED)
# What a reset or a terminal status clears.
_CLEARED: dict[str, Any] = {
    "locked_at": None,
    "lock_expires_at": None,
    "followup_at": None,
    "followup_count": 0,
    "followup_max": 0,
    "followup_message": "",
    "followup_channel": "",
    "followup_chat_id": "",
    "progress_percent": None,
}


class BoardError(Exception):
    """A refused board action; ``message`` is written for the caller (often a model) to act on."""

    def __init__(self, message: str, *, code: str = "conflict") -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # not_found | conflict | invalid | forbidden


@dataclass(frozen=True)
class BoardActor:
    """Who acts on the board, as the task events record it (B §2.6)."""

    type: str  # agent | human | system
    id: str  # an agent key, a user id, or a system process ("ticker", "dispatch", …)
    agent: Agent | None = None

    @classmethod
    def of_agent(cls, agent: Agent) -> BoardActor:
        return cls(TaskEvent.ActorType.AGENT, agent.key, agent)

    @classmethod
    def human(cls, user_id: str) -> BoardActor:
        return cls(TaskEvent.ActorType.HUMAN, user_id)

    @classmethod
    def system(cls, name: str) -> BoardActor:
        return cls(TaskEvent.ActorType.SYSTEM, name)


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _tasks(team: Team) -> Any:
    return Task.objects.for_tenant(team.tenant).filter(team_id=team.pk)


def task_data(task: Task) -> dict[str, Any]:
    """A task as live events and API answers carry it."""
    owner = task.owner
    return {
        "id": str(task.pk),
        "team": str(task.team_id),
        "identifier": task.identifier,
        "number": task.number,
        "subject": task.subject,
        "status": task.status,
        "owner": owner.key if owner is not None else None,
        "priority": task.priority,
        "task_type": task.task_type,
        "blocked_by": [str(b) for b in task.blocked_by],
        "progress_percent": task.progress_percent,
        "progress_step": task.progress_step,
        "result": _preview(task.result) if task.result else None,
        "channel": task.channel,
        "chat_id": task.chat_id,
        "user_id": task.user_id,
        "comment_count": task.comment_count,
        "attachment_count": task.attachment_count,
        "updated_at": task.updated_at.isoformat() if task.updated_at else None,
    }


def topic(team: Team | uuid.UUID | str) -> str:
    team_id = team.pk if isinstance(team, Team) else team
    return f"team:{uuid.UUID(str(team_id))}"


def _publish(team: Team, type: str, data: dict[str, Any]) -> None:
    events.publish(tenant=team.tenant, topic=topic(team), type=type, data=data)


def _record(
    task: Task,
    event_type: str,
    actor: BoardActor,
    data: dict[str, Any] | None = None,
    *,
    live: dict[str, Any] | None = None,
) -> TaskEvent:
    """Write the task event and publish ``task.<type>`` on the team's topic; ``live`` adds fields to
    the published event only (never stored in the audit trail)."""
    event = TaskEvent.objects.create(
        tenant_id=task.tenant_id,
        team_id=task.team_id,
        task=task,
        task_number=task.number,
        task_identifier=task.identifier,
        event_type=event_type,
        actor_type=actor.type,
        actor_id=actor.id[:255],
        data=data,
    )
    _publish(
        task.team,
        f"task.{event_type}",
        {
            **task_data(task),
            "event": {"type": event_type, "actor_type": actor.type, "actor_id": actor.id, "data": data},
            **(live or {}),
        },
    )
    return event


def record_event(
    task: Task,
    event_type: str,
    actor: BoardActor,
    data: dict[str, Any] | None = None,
    *,
    live: dict[str, Any] | None = None,
) -> TaskEvent:
    """A task event written (and published) by a module built on the board (dispatch)."""
    return _record(task, event_type, actor, data, live=live)


def _reload(team: Team, task_id: uuid.UUID | str) -> Task:
    task: Task | None = (
        _tasks(team).select_related("owner", "team", "team__tenant").filter(pk=task_id).first()
    )
    if task is None:
        raise BoardError("task not found on this team's board", code="not_found")
    return task


def get_task(team: Team, task_id: uuid.UUID | str) -> Task:
    """A task of ``team`` (another team's or tenant's is "not found")."""
    try:
        task_id = uuid.UUID(str(task_id))
    except ValueError:
        raise BoardError(
            f"invalid task_id {str(task_id)[:60]!r} — use the UUID from the task list, not the task number",
            code="invalid",
        ) from None
    return _reload(team, task_id)


def _refusal(team: Team, task_id: uuid.UUID | str, wanted: Iterable[str], action: str) -> BoardError:
    task = _tasks(team).filter(pk=task_id).values_list("status", flat=True).first()
    if task is None:
        return BoardError("task not found on this team's board", code="not_found")
    states = " or ".join(sorted(str(s) for s in wanted))
    return BoardError(f"cannot {action}: the task is {task}, not {states}")


def _transition(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    action: str,
    source: Sequence[str],
    target: str,
    actor: BoardActor,
    event: str,
    data: dict[str, Any] | None = None,
    changes: dict[str, Any] | None = None,
    guard: dict[str, Any] | None = None,
) -> Task:
    """The one conditional UPDATE of a status change, its event, and — for a terminal target — the
    unblocking of dependents. Call inside a transaction."""
    now = timezone.now()
    values = {"status": target, "updated_at": now, **(changes or {})}
    updated = _tasks(team).filter(pk=task_id, status__in=list(source), **(guard or {})).update(**values)
    if updated != 1:
        raise _refusal(team, task_id, source, action)
    task = _reload(team, task_id)
    _record(task, event, actor, data)
    if target in TERMINAL:
        _unblock_dependents(team, task, actor)
    return task


# --- Creation -----------------------------------------------------------------------------------------


def _member(team: Team, agent: Agent) -> bool:
    return TeamMember.objects.for_tenant(team.tenant).filter(team_id=team.pk, agent_id=agent.pk).exists()


def _blockers(team: Team, blocked_by: Iterable[Any]) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = []
    for raw in blocked_by:
        try:
            ident = uuid.UUID(str(raw))
        except ValueError:
            raise BoardError(
                f"blocked_by: {str(raw)[:60]!r} is not a task id (use the UUIDs from the task list)",
                code="invalid",
            ) from None
        if ident not in ids:
            ids.append(ident)
    if len(ids) > 100:
        raise BoardError("blocked_by: at most 100 tasks", code="invalid")
    if not ids:
        return ids
    found = dict(_tasks(team).filter(pk__in=ids).values_list("pk", "status"))
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise BoardError(f"blocked_by: no task {', '.join(missing)} on this team's board", code="invalid")
    done = [str(i) for i in ids if found[i] in TERMINAL]
    if done:
        raise BoardError(
            f"blocked_by: task {', '.join(done)} is already completed, failed or cancelled", code="invalid"
        )
    return ids


def _check_text(name: str, value: str, limit: int, *, required: bool = False) -> str:
    if not isinstance(value, str):
        raise BoardError(f"{name} must be a string", code="invalid")
    if required and not value.strip():
        raise BoardError(f"{name} is required", code="invalid")
    if len(value) > limit:
        raise BoardError(f"{name} is longer than {limit} characters", code="invalid")
    return value


def create_task(
    team: Team,
    *,
    actor: BoardActor,
    subject: str,
    description: str = "",
    priority: int = 0,
    blocked_by: Iterable[Any] = (),
    owner: Agent | None = None,
    require_approval: bool = False,
    task_type: str = "general",
    user_id: str = "",
    channel: str = "",
    chat_id: str = "",
    parent: Task | None = None,
    metadata: dict[str, Any] | None = None,
) -> Task:
    """A new task, numbered per (team, chat) as ``T-<number>-<4 hex>``: ``in_review`` when it needs
    approval, ``blocked`` when it waits on other tasks, else ``pending`` (claimable by any member when
    it has no owner, or waiting for its owner)."""
    subject = _check_text("subject", subject, SUBJECT_MAX, required=True).strip()
    description = _check_text("description", description, DESCRIPTION_MAX)
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise BoardError("priority must be an integer from -1000 to 1000", code="invalid")
    if not task_type or len(task_type) > 30 or not task_type.replace("_", "").isalnum():
        raise BoardError("task_type is a word of at most 30 letters, digits or _", code="invalid")
    chat_id = _check_text("chat_id", chat_id, 255)
    channel = _check_text("channel", channel, 50)
    if owner is not None and not _member(team, owner):
        raise BoardError(f"{owner.key} is not a member of team {team.name}", code="invalid")
    with transaction.atomic():
        locked = (
            Team.objects.for_tenant(team.tenant)
            .select_for_update()
            .filter(pk=team.pk)
            .values_list("status", flat=True)
        )
        status_of_team = locked.first()
        if status_of_team is None:
            raise BoardError("team not found", code="not_found")
        if status_of_team != Team.Status.ACTIVE:
            raise BoardError(f"team {team.name} is archived; it takes no new tasks")
        blockers = _blockers(team, blocked_by)
        top = _tasks(team).filter(chat_id=chat_id).aggregate(top=Max("number"))["top"] or 0
        ident = uuid.uuid4()
        number = top + 1
        status = Status.IN_REVIEW if require_approval else Status.BLOCKED if blockers else Status.PENDING
        task = Task.objects.create(
            id=ident,
            tenant=team.tenant,
            team=team,
            subject=subject,
            description=description,
            status=status,
            owner=owner,
            blocked_by=blockers,
            priority=priority,
            metadata=dict(metadata or {}),
            user_id=user_id[:255],
            channel=channel,
            chat_id=chat_id,
            task_type=task_type,
            number=number,
            identifier=f"T-{number:03d}-{ident.hex[-4:]}",
            created_by_agent=actor.agent,
            parent=parent,
            require_approval=require_approval,
        )
        task = _reload(team, task.pk)
        _record(task, EventType.CREATED, actor)
    return task


# --- Work -----------------------------------------------------------------------------------------------


def _lock(now: datetime) -> dict[str, Any]:
    return {
        "locked_at": now,
        "lock_expires_at": now + LOCK_DURATION,
        "started_at": Coalesce(F("started_at"), now),
    }


@transaction.atomic
def claim(team: Team, task_id: uuid.UUID | str, *, agent: Agent, actor: BoardActor) -> Task:
    """An unassigned pending task becomes the caller's, in progress (compare-and-set: of concurrent
    claimers exactly one wins)."""
    if not _member(team, agent):
        raise BoardError(f"{agent.key} is not a member of team {team.name}", code="forbidden")
    now = timezone.now()
    updated = (
        _tasks(team)
        .filter(pk=task_id, status=Status.PENDING, owner__isnull=True)
        .update(status=Status.IN_PROGRESS, owner=agent, updated_at=now, **_lock(now))
    )
    if updated != 1:
        current = _tasks(team).filter(pk=task_id).values_list("status", "owner__key").first()
        if current is None:
            raise BoardError("task not found on this team's board", code="not_found")
        if current[0] == Status.PENDING:
            raise BoardError(f"cannot claim: the task is assigned to {current[1]}")
        raise BoardError(f"cannot claim: the task is {current[0]}, not pending")
    task = _reload(team, task_id)
    _record(task, EventType.CLAIMED, actor)
    return task


@transaction.atomic
def assign(team: Team, task_id: uuid.UUID | str, *, agent: Agent, actor: BoardActor) -> Task:
    """A pending task (any owner) goes to ``agent``, in progress."""
    if not _member(team, agent):
        raise BoardError(f"{agent.key} is not a member of team {team.name}", code="invalid")
    now = timezone.now()
    return _transition(
        team,
        task_id,
        action="assign",
        source=[Status.PENDING],
        target=Status.IN_PROGRESS,
        actor=actor,
        event=EventType.ASSIGNED,
        changes={"owner": agent, **_lock(now)},
    )


@transaction.atomic
def complete(team: Team, task_id: uuid.UUID | str, *, result: str, actor: BoardActor) -> Task:
    result = _check_text("result", result, RESULT_MAX, required=True)
    return _transition(
        team,
        task_id,
        action="complete",
        source=[Status.IN_PROGRESS],
        target=Status.COMPLETED,
        actor=actor,
        event=EventType.COMPLETED,
        changes={"result": result, **_CLEARED},
    )


@transaction.atomic
def cancel(team: Team, task_id: uuid.UUID | str, *, reason: str, actor: BoardActor) -> Task:
    reason = _check_text("reason", reason or "Cancelled", REASON_MAX_CHARS)
    source = [s for s in Status.values if s not in (Status.COMPLETED, Status.CANCELLED)]
    return _transition(
        team,
        task_id,
        action="cancel",
        source=source,
        target=Status.CANCELLED,
        actor=actor,
        event=EventType.CANCELLED,
        data={"reason": reason} if reason else None,
        changes={"result": reason, **_CLEARED},
    )


@transaction.atomic
def fail(
    team: Team, task_id: uuid.UUID | str, *, message: str, actor: BoardActor, pending: bool = False
) -> Task:
    """An in-progress task (or, with ``pending``, a pending or blocked one) fails: ``FAILED: <message>``."""
    message = _preview(message, REASON_MAX_CHARS) if message else "failed"
    return _transition(
        team,
        task_id,
        action="fail",
        source=[Status.PENDING, Status.BLOCKED] if pending else [Status.IN_PROGRESS],
        target=Status.FAILED,
        actor=actor,
        event=EventType.FAILED,
        data={"reason": message},
        changes={"result": f"FAILED: {message}", **_CLEARED},
    )


@transaction.atomic
def review(team: Team, task_id: uuid.UUID | str, *, actor: BoardActor) -> Task:
    return _transition(
        team,
        task_id,
        action="submit for review",
        source=[Status.IN_PROGRESS],
        target=Status.IN_REVIEW,
        actor=actor,
        event=EventType.REVIEWED,
    )


@transaction.atomic
def approve(team: Team, task_id: uuid.UUID | str, *, actor: BoardActor) -> Task:
    """Reviewed work is completed; a task that waited for approval before it ever ran becomes pending
    (blocked while it has open blockers): its work has yet to happen."""
    task = _reload(team, task_id)
    if task.status != Status.IN_REVIEW:
        raise BoardError(f"cannot approve: the task is {task.status}, not in_review")
    if task.started_at is None:
        target = Status.BLOCKED if task.blocked_by else Status.PENDING
        return _transition(
            team,
            task_id,
            action="approve",
            source=[Status.IN_REVIEW],
            target=target,
            actor=actor,
            event=EventType.APPROVED,
            changes={"require_approval": False},
            guard={"started_at__isnull": True},
        )
    return _transition(
        team,
        task_id,
        action="approve",
        source=[Status.IN_REVIEW],
        target=Status.COMPLETED,
        actor=actor,
        event=EventType.APPROVED,
        changes=dict(_CLEARED),
    )


@transaction.atomic
def reject(team: Team, task_id: uuid.UUID | str, *, reason: str, actor: BoardActor) -> Task:
    reason = _check_text("reason", reason or "Rejected", REASON_MAX_CHARS)
    return _transition(
        team,
        task_id,
        action="reject",
        source=[Status.IN_REVIEW],
        target=Status.CANCELLED,
        actor=actor,
        event=EventType.REJECTED,
        data={"reason": reason},
        changes={"result": reason, **_CLEARED},
    )


@transaction.atomic
def reset(
    team: Team, task_id: uuid.UUID | str, *, actor: BoardActor, note: str = "", instructions: str = ""
) -> Task:
    """Back to pending (retry): from stale, failed, cancelled, in_review or completed. The owner stays,
    so the task goes back to the same member; open escalations of the task count as retried. The retry
    event keeps the note and the new instructions."""
    instructions = _check_text("instructions", instructions, INSTRUCTIONS_MAX_CHARS).strip()
    data = {k: v for k, v in (("reason", note), ("instructions", instructions)) if v}
    task = _transition(
        team,
        task_id,
        action="retry",
        source=list(RETRYABLE),
        target=Status.PENDING,
        actor=actor,
        event=EventType.RETRIED,
        data=data or None,
        changes={"result": "", **_CLEARED},
    )
    now = timezone.now()
    Escalation.objects.for_tenant(team.tenant).filter(task_id=task.pk, state=Escalation.State.OPEN).update(
        state=Escalation.State.RETRIED, resolved_at=now, resolved_by=actor.id[:255], updated_at=now
    )
    return task


@transaction.atomic
def progress(team: Team, task_id: uuid.UUID | str, *, percent: int, step: str, actor: BoardActor) -> Task:
    """The owner's progress (never backwards) and heartbeat (the lock is renewed)."""
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise BoardError("percent must be 0-100", code="invalid")
    step = _check_text("step", step, 500)
    now = timezone.now()
    updated = (
        _tasks(team)
        .filter(pk=task_id, status=Status.IN_PROGRESS)
        .update(
            # Never backwards: a lower value keeps the one reported before.
            progress_percent=Greatest(Coalesce(F("progress_percent"), 0), Value(percent)),
            progress_step=step,
            lock_expires_at=now + LOCK_DURATION,
            updated_at=now,
        )
    )
    if updated != 1:
        raise _refusal(team, task_id, [Status.IN_PROGRESS], "update progress")
    task = _reload(team, task_id)
    _record(
        task,
        EventType.PROGRESS,
        actor,
        {"progress_percent": task.progress_percent, "progress_step": task.progress_step},
    )
    return task


@transaction.atomic
def update(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    actor: BoardActor,
    subject: str | None = None,
    description: str | None = None,
    priority: int | None = None,
    blocked_by: Iterable[Any] | None = None,
) -> Task:
    """Change what the task says (never its status; a pending task given blockers stays pending)."""
    changes: dict[str, Any] = {}
    if subject is not None:
        changes["subject"] = _check_text("subject", subject, SUBJECT_MAX, required=True).strip()
    if description is not None:
        changes["description"] = _check_text("description", description, DESCRIPTION_MAX)
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
            raise BoardError("priority must be an integer from -1000 to 1000", code="invalid")
        changes["priority"] = priority
    if blocked_by is not None:
        blockers = _blockers(team, blocked_by)
        if uuid.UUID(str(task_id)) in blockers:
            raise BoardError("blocked_by: a task cannot wait on itself", code="invalid")
        cycle = waits_on(team, blockers, uuid.UUID(str(task_id)))
        if cycle:
            raise BoardError(
                f"blocked_by: task {cycle} already waits (directly or indirectly) on this task; "
                "that would be a cycle",
                code="invalid",
            )
        changes["blocked_by"] = blockers
    if not changes:
        raise BoardError(
            "no updates provided (set subject, description, priority or blocked_by)", code="invalid"
        )
    if not _tasks(team).filter(pk=task_id).update(**changes, updated_at=timezone.now()):
        raise BoardError("task not found on this team's board", code="not_found")
    task = _reload(team, task_id)
    _record(task, EventType.UPDATED, actor, {"fields": sorted(changes)})
    return task


@transaction.atomic
def attach(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    path: str,
    actor: BoardActor,
    file_size: int = 0,
    mime_type: str = "",
) -> tuple[Task, bool]:
    """Attach a workspace path (idempotent: the same path twice is one attachment). Returns the task
    and whether the attachment is new."""
    path = _check_text("path", path, 4096, required=True)
    task = _reload(team, task_id)
    _, created = TaskAttachment.objects.get_or_create(
        tenant=team.tenant,
        task=task,
        path=path,
        defaults={
            "team": team,
            "chat_id": task.chat_id,
            "file_size": max(0, int(file_size)),
            "mime_type": mime_type[:255],
            "created_by_agent": actor.agent,
            "created_by_sender_id": "" if actor.agent else actor.id[:255],
        },
    )
    if created:
        _tasks(team).filter(pk=task.pk).update(
            attachment_count=F("attachment_count") + 1, updated_at=timezone.now()
        )
        task = _reload(team, task.pk)
        _record(task, EventType.ATTACHMENT_ADDED, actor, {"path": path})
    return task, created


@transaction.atomic
def delete(team: Team, task_id: uuid.UUID | str, *, actor: BoardActor) -> None:
    """Delete a completed, failed or cancelled task; its events stay (with its identifier)."""
    task = _reload(team, task_id)
    if task.status not in TERMINAL:
        raise BoardError(
            f"cannot delete: the task is {task.status}; only completed, failed or cancelled tasks"
        )
    _record(task, EventType.DELETED, actor, {"subject": _preview(task.subject, 200)})
    _tasks(team).filter(pk=task.pk, status__in=list(TERMINAL)).delete()


# --- Comments and blocker escalation ----------------------------------------------------------------------


@dataclass(frozen=True)
class Commented:
    comment: TaskComment
    task: Task
    failed: bool = False  # the blocker failed the task
    escalation: Escalation | None = None
    message: str = ""


@transaction.atomic
def comment(
    team: Team, task_id: uuid.UUID | str, *, actor: BoardActor, text: str, kind: str = TaskComment.Type.NOTE
) -> Commented:
    """A note, or a blocker: on an in-progress task a blocker fails it (``FAILED: Blocked: …``), asks
    the owner's runner to stop (``run.cancel``) and escalates to the lead unless the team turned that
    off (B §2.5); the escalation is kept for humans to follow."""
    if not isinstance(text, str) or not text.strip():
        raise BoardError("text is required", code="invalid")
    if len(text.encode()) > COMMENT_MAX_BYTES:
        raise BoardError(f"text is longer than {COMMENT_MAX_BYTES} bytes", code="invalid")
    kind = TaskComment.Type.BLOCKER if kind == TaskComment.Type.BLOCKER else TaskComment.Type.NOTE
    task = _reload(team, task_id)
    note = TaskComment.objects.create(
        tenant=team.tenant,
        task=task,
        agent=actor.agent,
        user_id="" if actor.agent else actor.id[:255],
        content=text,
        comment_type=kind,
    )
    _tasks(team).filter(pk=task.pk).update(comment_count=F("comment_count") + 1, updated_at=timezone.now())
    task = _reload(team, task.pk)
    _record(task, EventType.COMMENTED, actor, {"comment_text": _preview(text), "comment_type": kind})
    if kind != TaskComment.Type.BLOCKER:
        return Commented(note, task, message=f"Comment added to task #{task.number} ({task.identifier}).")
    if task.status != Status.IN_PROGRESS:
        return Commented(
            note,
            task,
            message=(
                f'Blocker comment saved on task #{task.number} "{task.subject}", but task is already '
                f"{task.status} — no escalation needed."
            ),
        )
    reason = _preview("Blocked: " + text, REASON_MAX_CHARS)
    owner = task.owner
    try:
        with transaction.atomic():
            task = _transition(
                team,
                task.pk,
                action="fail",
                source=[Status.IN_PROGRESS],
                target=Status.FAILED,
                actor=actor,
                event=EventType.FAILED,
                data={"reason": reason},
                changes={"result": f"FAILED: {reason}", **_CLEARED},
            )
    except BoardError:
        return Commented(
            note, _reload(team, task.pk), message="Blocker comment saved. Task may have already completed."
        )
    escalate = team_settings.blocker_escalation(team.settings or {})
    escalation = Escalation.objects.create(
        tenant=team.tenant,
        team=team,
        task=task,
        member=owner,
        comment=note,
        blocker=text,
        notified_lead=escalate,
    )
    if owner is not None:
        _publish(team, "run.cancel", {"agent": owner.key, "task": str(task.pk), "reason": reason})
        hooks.cancel_runs(task, reason)
    data = {
        "id": str(escalation.pk),
        "task": task_data(task),
        "member": owner.key if owner is not None else None,
        "lead": team.lead.key,
        "blocker": _preview(text),
        "state": escalation.state,
        "notified_lead": escalate,
    }
    if escalate:
        data["message"] = (
            f'[Escalation] Member "{owner.key if owner else "?"}" is blocked on task #{task.number} '
            f'"{task.subject}"\n\nBlocker: {text}\n\nUse team_tasks(action="retry", task_id="{task.pk}") '
            "to reopen with updated instructions."
        )
    _publish(team, "escalation.created", data)
    lead_note = (
        "Leader has been notified" if escalate else "Escalation to the leader is turned off for this team"
    )
    return Commented(
        note,
        task,
        failed=True,
        escalation=escalation,
        message=(
            f'Task #{task.number} "{task.subject}" auto-failed due to blocker. {lead_note} and can retry '
            "with updated instructions."
        ),
    )


@transaction.atomic
def resolve_escalation(team: Team, escalation_id: uuid.UUID | str, *, actor: BoardActor) -> Escalation:
    now = timezone.now()
    updated = (
        Escalation.objects.for_tenant(team.tenant)
        .filter(pk=escalation_id, team_id=team.pk)
        .exclude(state=Escalation.State.RESOLVED)
        .update(state=Escalation.State.RESOLVED, resolved_at=now, resolved_by=actor.id[:255], updated_at=now)
    )
    escalation = Escalation.objects.for_tenant(team.tenant).filter(pk=escalation_id, team_id=team.pk).first()
    if escalation is None:
        raise BoardError("escalation not found", code="not_found")
    if not updated:
        raise BoardError("the escalation is already resolved")
    _publish(team, "escalation.resolved", {"id": str(escalation.pk), "task": str(escalation.task_id)})
    return escalation


# --- Unblocking and the ticker's sweeps -------------------------------------------------------------------

_UNBLOCK_SQL = """
WITH waiting AS (
    SELECT id, status FROM teams_task
    WHERE tenant_id = %s AND team_id = %s AND %s = ANY(blocked_by)
    FOR UPDATE
)
UPDATE teams_task AS t
SET blocked_by = array_remove(t.blocked_by, %s),
    status = CASE WHEN t.status = 'blocked' AND cardinality(array_remove(t.blocked_by, %s)) = 0
                  THEN 'pending' ELSE t.status END,
    updated_at = now()
FROM waiting
WHERE t.id = waiting.id
RETURNING t.id, waiting.status, t.status
"""


def _unblock_dependents(team: Team, task: Task, actor: BoardActor) -> list[uuid.UUID]:
    """Remove ``task`` from its dependents' blockers; those left with none go from blocked to pending.
    Returns the ids of the tasks that became pending."""
    with connection.cursor() as cursor:
        cursor.execute(_UNBLOCK_SQL, [team.tenant_id, team.pk, task.pk, task.pk, task.pk])
        rows = cursor.fetchall()
    freed = [row[0] for row in rows if row[1] == Status.BLOCKED and row[2] == Status.PENDING]
    for ident in freed:
        _record(_reload(team, ident), EventType.UNBLOCKED, actor, {"blocker": str(task.pk)})
    return freed


def _sweep(
    tenant: Tenant, queryset: Any, *, target: str, event: str, changes: dict[str, Any], actor: BoardActor
) -> list[Task]:
    """Move every task of ``queryset`` (one tenant's) to ``target``, each guarded by its current status."""
    moved: list[Task] = []
    for task_id, team_id, status in queryset.values_list("pk", "team_id", "status")[:1000]:
        with transaction.atomic():
            team = Team.objects.for_tenant(tenant).select_related("tenant").get(pk=team_id)
            updated = (
                _tasks(team)
                .filter(pk=task_id, status=status)
                .update(status=target, updated_at=timezone.now(), **changes)
            )
            if updated == 1:
                task = _reload(team, task_id)
                _record(task, event, actor)
                moved.append(task)
    return moved


def _active(tenant: Tenant) -> Any:
    return Task.objects.for_tenant(tenant).filter(team__status=Team.Status.ACTIVE)


def recover_expired_locks(tenant: Tenant, now: datetime | None = None) -> list[Task]:
    """In-progress tasks whose owner stopped renewing the lock go back to pending (same owner)."""
    now = now or timezone.now()
    expired = _active(tenant).filter(status=Status.IN_PROGRESS, lock_expires_at__lt=now)
    return _sweep(
        tenant,
        expired,
        target=Status.PENDING,
        event=EventType.RECOVERED,
        changes={"locked_at": None, "lock_expires_at": None, "followup_at": None},
        actor=BoardActor.system("ticker"),
    )


def mark_stale(tenant: Tenant, now: datetime | None = None) -> list[Task]:
    """Pending tasks untouched for 2 hours and in-review ones for 4 hours become stale."""
    now = now or timezone.now()
    actor = BoardActor.system("ticker")
    pending = _active(tenant).filter(status=Status.PENDING, updated_at__lt=now - STALE_PENDING_AFTER)
    in_review = _active(tenant).filter(status=Status.IN_REVIEW, updated_at__lt=now - STALE_IN_REVIEW_AFTER)
    return [
        *_sweep(tenant, pending, target=Status.STALE, event=EventType.STALE, changes={}, actor=actor),
        *_sweep(tenant, in_review, target=Status.STALE, event=EventType.STALE, changes={}, actor=actor),
    ]


def fix_orphaned_blocked(tenant: Tenant) -> list[Task]:
    """Blocked tasks none of whose blockers is still open (all finished or deleted) become pending."""
    candidates = list(_active(tenant).filter(status=Status.BLOCKED).values_list("pk", "blocked_by")[:1000])
    ids = {b for _, blockers in candidates for b in blockers}
    still_open = set(
        Task.objects.for_tenant(tenant)
        .filter(pk__in=ids)
        .exclude(status__in=list(TERMINAL))
        .values_list("pk", flat=True)
    )
    orphaned = [pk for pk, blockers in candidates if not set(blockers) & still_open]
    return _sweep(
        tenant,
        Task.objects.for_tenant(tenant).filter(pk__in=orphaned, status=Status.BLOCKED),
        target=Status.PENDING,
        event=EventType.UNBLOCKED,
        changes={"blocked_by": []},
        actor=BoardActor.system("ticker"),
    )


def waits_on(team: Team, starts: Iterable[uuid.UUID], target: uuid.UUID) -> str:
    """The first of ``starts`` that waits, directly or through other tasks, on ``target`` (as a string),
    or "" when none does: making ``target`` wait on it would close a cycle."""
    for start in starts:
        seen: set[uuid.UUID] = set()
        frontier = {start}
        while frontier:
            if target in frontier:
                return str(start)
            seen |= frontier
            rows = _tasks(team).filter(pk__in=frontier).values_list("blocked_by", flat=True)
            frontier = {b for blockers in rows for b in blockers} - seen
            if len(seen) > 10_000:
                break
    return ""


# --- Asking the user, follow-up reminders, the heartbeat -------------------------------------------------

INTERNAL_CHANNELS = ("teammate", "system", "dashboard")
ASK_MAX_CHARS = 2000


@transaction.atomic
def ask_user(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    question: str,
    actor: BoardActor,
    channel: str = "",
    chat_id: str = "",
) -> Task:
    """The owner waits for the user: reminders of ``question`` go to the task's channel and chat (or, when
    the task came from an internal channel, to the caller's) every ``followup_interval_minutes`` (30),
    at most ``followup_max_reminders`` times (0: until cleared). Only while the task is in progress."""
    question = _check_text("text", question, ASK_MAX_CHARS, required=True).strip()
    task = _reload(team, task_id)
    if task.channel and task.channel not in INTERNAL_CHANNELS:
        channel, chat_id = task.channel, task.chat_id
    if not channel or channel in INTERNAL_CHANNELS:
        raise BoardError(
            f"ask_user needs a user-facing channel; this task came from {channel or 'no channel'!r} and "
            "no user is there to answer. Comment on the task or ask the team lead instead.",
            code="invalid",
        )
    settings = team.settings or {}
    now = timezone.now()
    due = now + timedelta(minutes=team_settings.followup_interval_minutes(settings))
    most = team_settings.followup_max_reminders(settings)
    updated = (
        _tasks(team)
        .filter(pk=task.pk, status=Status.IN_PROGRESS)
        .update(
            followup_at=due,
            followup_count=0,
            followup_max=most,
            followup_message=question,
            followup_channel=channel[:60],
            followup_chat_id=chat_id[:255],
            updated_at=now,
        )
    )
    if updated != 1:
        raise _refusal(team, task.pk, [Status.IN_PROGRESS], "ask the user")
    task = _reload(team, task.pk)
    _record(
        task,
        EventType.UPDATED,
        actor,
        {
            "followup": "set",
            "followup_message": _preview(question),
            "followup_channel": task.followup_channel,
            "followup_chat_id": task.followup_chat_id,
            "followup_at": due.isoformat(),
            "followup_max": most,
        },
    )
    return task


@transaction.atomic
def clear_ask_user(team: Team, task_id: uuid.UUID | str, *, actor: BoardActor) -> tuple[Task, bool]:
    """Stop the reminders (the user answered). Returns the task and whether a follow-up was pending."""
    task = _reload(team, task_id)
    had = task.followup_at is not None or bool(task.followup_message)
    if had:
        _tasks(team).filter(pk=task.pk).update(
            followup_at=None,
            followup_count=0,
            followup_max=0,
            followup_message="",
            followup_channel="",
            followup_chat_id="",
            updated_at=timezone.now(),
        )
        task = _reload(team, task.pk)
        _record(task, EventType.UPDATED, actor, {"followup": "cleared"})
    return task, had


@transaction.atomic
def renew_lock(team: Team, task_id: uuid.UUID | str) -> bool:
    """The owner's heartbeat without progress: the lock of an in-progress task runs 60 minutes more."""
    now = timezone.now()
    return bool(
        _tasks(team)
        .filter(pk=task_id, status=Status.IN_PROGRESS)
        .update(lock_expires_at=now + LOCK_DURATION, updated_at=now)
    )


FOLLOWUP_BATCH = 100


def reminder_text(count: int, most: int, message: str) -> str:
    return f"Reminder ({count}/{most}): {message}" if most else f"Reminder ({count}): {message}"


def process_followups(tenant: Tenant, now: datetime | None = None) -> list[Task]:
    """Send the reminders that are due in one tenant (at most 100 a run): each is a ``task.reminder``
    event on the team's topic carrying ``Reminder (k[/max]): <message>`` for the follow-up channel and
    chat, and an ``updated`` task event. The next one is due an interval later, or never once the
    maximum is reached."""
    now = now or timezone.now()
    due = (
        _active(tenant)
        .filter(status=Status.IN_PROGRESS, followup_at__lte=now)
        .filter(_open_followups())
        .order_by("followup_at", "id")
        .values_list("pk", "team_id", "followup_count", "followup_at")[:FOLLOWUP_BATCH]
    )
    sent: list[Task] = []
    for task_id, team_id, count, at in list(due):
        with transaction.atomic():
            team = Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=team_id)
            task = _reload(team, task_id)
            number = count + 1
            finished = bool(task.followup_max) and number >= task.followup_max
            interval = timedelta(minutes=team_settings.followup_interval_minutes(team.settings or {}))
            updated = (
                _tasks(team)
                .filter(pk=task_id, status=Status.IN_PROGRESS, followup_count=count, followup_at=at)
                .update(
                    followup_count=number,
                    followup_at=None if finished else now + interval,
                )
            )
            if updated != 1:
                continue
            task = _reload(team, task_id)
            text = reminder_text(number, task.followup_max, task.followup_message)
            _record(
                task,
                EventType.UPDATED,
                BoardActor.system("ticker"),
                {
                    "followup": "reminder",
                    "reminder": number,
                    "followup_max": task.followup_max,
                    "text": _preview(text),
                },
            )
            _publish(
                team,
                "task.reminder",
                {
                    "task": str(task.pk),
                    "identifier": task.identifier,
                    "text": text,
                    "channel": task.followup_channel,
                    "chat_id": task.followup_chat_id,
                    "agent": task.owner.key if task.owner is not None else None,
                    "count": number,
                    "max": task.followup_max,
                },
            )
            sent.append(task)
    return sent


def _open_followups() -> Q:
    """Follow-ups with reminders left: no maximum, or fewer sent than the maximum."""
    return Q(followup_max=0) | Q(followup_count__lt=F("followup_max"))


# --- Assignment of waiting tasks, and sending reviewed work back ------------------------------------------


@transaction.atomic
def reassign(team: Team, task_id: uuid.UUID | str, *, agent: Agent, actor: BoardActor) -> Task:
    """Give a pending or blocked task to ``agent`` without starting it: it goes to that member when it
    is dispatched (at once when pending, once its blockers finish when blocked)."""
    if not _member(team, agent):
        raise BoardError(f"{agent.key} is not a member of team {team.name}", code="invalid")
    updated = (
        _tasks(team)
        .filter(pk=task_id, status__in=[Status.PENDING, Status.BLOCKED])
        .update(owner=agent, updated_at=timezone.now())
    )
    if updated != 1:
        raise _refusal(team, task_id, [Status.PENDING, Status.BLOCKED], "assign")
    task = _reload(team, task_id)
    _record(task, EventType.ASSIGNED, actor, {"owner": agent.key})
    return task


@transaction.atomic
def send_back(team: Team, task_id: uuid.UUID | str, *, reason: str, actor: BoardActor) -> Task:
    """Rejected work goes back to pending for its owner to redo (its dependents stay blocked)."""
    reason = _check_text("reason", reason or "Rejected", REASON_MAX_CHARS)
    return _transition(
        team,
        task_id,
        action="reject",
        source=[Status.IN_REVIEW],
        target=Status.PENDING,
        actor=actor,
        event=EventType.REJECTED,
        data={"reason": reason},
        changes={"result": "", **_CLEARED},
        guard={"owner__isnull": False},
    )
