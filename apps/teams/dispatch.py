"""Dispatch: handing runnable tasks to their owners' runners, and the rules after a member's turn
(SPEC B §2.3 "Dispatch" and "Post-turn", with SPEC Part A's fixes: every auto-fail really fails).

A dispatch is announced as a ``task.dispatched`` event on the team's topic ``team:<team id>``, published
after the transaction that assigned the task commits. Agent runners subscribe to the topic and start a
turn of the owner agent for each. The event's ``data`` is the task as ``board.task_data`` gives it
(``id``, ``team``, ``identifier``, ``number``, ``subject``, ``status`` = ``in_progress``, ``owner``,
``priority``, ``channel``, ``chat_id``, ``user_id``, …), the task ``event`` (type ``dispatched``), and::

    "dispatch": {
        "team": "<team id>",
        "team_name": "Builders",
        "task": "<task id>",
        "agent": "<owner agent key>",          # whose turn to start
        "channel": "system",                    # the channel of the turn's inbound message
        "sender": "teammate:dashboard",         # who the message comes from
        "chat_id": "<the task's chat>",
        "origin": {"channel": "...", "chat_id": "...", "user_id": "...", "peer_kind": "..."},
        "message": "[Assigned task #1 (id: …)]: …",   # the turn's input, see assignment_message()
        "attempt": 1,                           # dispatches of this task so far (3 at most)
        "reason": "assigned" | "unblocked" | "recovered" | "retried" | "rejected",
    }

When the turn ends the runner calls :func:`after_member_turn`, which applies the post-turn rules and
runs another dispatch round. A round (:func:`dispatch_round`) gives each owner at most one task (the
highest priority, then the oldest), skips owners that are already working on one, fails tasks that can
never run (owned by the lead, waiting on themselves or in a cycle), and trips the circuit breaker: a
task already dispatched three times fails instead of going out again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.teams import board, hooks
from apps.teams.board import BoardActor, BoardError
from apps.teams.models import Task, TaskComment, TaskEvent, Team
from apps.tenants.models import Agent

Status = Task.Status

ROUND_LIMIT = 30
CIRCUIT_BREAKER = 3
RECENT_COMMENTS = 3
COMMENT_CHARS = 500
BLOCKER_RESULT_CHARS = 4000
TURN_RESULT_MAX = 100_000
NO_RESULT = "Agent run ended without explicit result"
LOOP_DETECTED = "Agent run terminated by loop detector"
DELIVERABLE_SEPARATOR = "\n\n---\n\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _tasks(team: Team) -> Any:
    return Task.objects.for_tenant(team.tenant).filter(team_id=team.pk)


def assignment_message(team: Team, task: Task, *, feedback: str = "", instructions: str = "") -> str:
    """The input of the owner's turn: the task, what its finished blockers produced, the latest
    comments, review feedback, a human's new instructions for a retry (whole), attached files, and how
    to report back."""
    parts = [f"[Assigned task #{task.number} (id: {task.pk})]: {task.subject}"]
    if task.description:
        parts.append(task.description)
    blocker_ids = [*task.metadata.get("original_blocked_by", []), *[str(b) for b in task.blocked_by]]
    ids = []
    for raw in blocker_ids:
        try:
            ids.append(uuid.UUID(str(raw)))
        except ValueError:
            continue
    if ids:
        done = _tasks(team).filter(pk__in=ids, status=Status.COMPLETED).order_by("number", "created_at")
        results = [
            f'--- #{b.number} "{b.subject}" ({b.identifier}) ---\n{_cut(b.result, BLOCKER_RESULT_CHARS)}'
            for b in done
        ]
        if results:
            parts.append("=== Completed blocker task results ===\n" + "\n\n".join(results))
    comments = list(
        TaskComment.objects.for_tenant(team.tenant)
        .filter(task_id=task.pk)
        .select_related("agent")
        .order_by("-created_at", "-id")[:RECENT_COMMENTS]
    )
    if comments:
        lines = [
            f"- {c.agent.key if c.agent else c.user_id or 'someone'}"
            f"{' (blocker)' if c.comment_type == TaskComment.Type.BLOCKER else ''}: "
            f"{_cut(c.content, COMMENT_CHARS)}"
            for c in reversed(comments)
        ]
        parts.append("=== Recent comments ===\n" + "\n".join(lines))
    if feedback:
        parts.append(f"=== Review feedback ===\n{_cut(feedback, COMMENT_CHARS)}")
    if instructions:
        parts.append(f"=== New instructions for this retry ===\n{instructions}")
    paths = list(task.attachments.values_list("path", flat=True)[:50]) if task.attachment_count else []
    if paths:
        parts.append("Attached files:\n" + "\n".join(f"- {p}" for p in paths))
    parts.append(
        f'When you are done, call team_tasks(action="complete", task_id="{task.pk}", result="<what you '
        'did and found>"). Report progress with team_tasks(action="progress", percent=N, step="..."). '
        f'If something blocks you, call team_tasks(action="comment", task_id="{task.pk}", '
        'type="blocker", text="<what blocks you>") and stop.'
    )
    return "\n\n".join(parts)


def _payload(
    team: Team, task: Task, *, attempt: int, reason: str, feedback: str, instructions: str = ""
) -> dict[str, Any]:
    assert task.owner is not None
    return {
        "team": str(team.pk),
        "team_name": team.name,
        "task": str(task.pk),
        "agent": task.owner.key,
        "channel": "system",
        "sender": "teammate:dashboard",
        "chat_id": task.chat_id,
        "origin": {
            "channel": task.channel,
            "chat_id": task.chat_id,
            "user_id": task.user_id,
            "peer_kind": str(task.metadata.get("peer_kind", "")),
        },
        "message": assignment_message(team, task, feedback=feedback, instructions=instructions),
        "attempt": attempt,
        "reason": reason,
        **({"instructions": instructions} if instructions else {}),
    }


def _attempts(task: Task) -> int:
    value = task.metadata.get("dispatch_count", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _breaker(team: Team, task: Task, actor: BoardActor) -> Task | None:
    """Fail a task dispatched three times already (it keeps coming back); None when it may go out."""
    attempts = _attempts(task)
    if attempts < CIRCUIT_BREAKER:
        return None
    return board.fail(
        team,
        task.pk,
        message=f"Task auto-failed after {attempts} dispatch attempts",
        actor=actor,
        pending=task.status != Status.IN_PROGRESS,
    )


@transaction.atomic
def dispatch(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    actor: BoardActor,
    reason: str,
    feedback: str = "",
    instructions: str = "",
) -> Task:
    """Announce an in-progress task to its owner's runner (``task.dispatched``), counting the attempt;
    a task dispatched three times already fails instead (the circuit breaker)."""
    task = _tasks(team).select_for_update().filter(pk=task_id).first()
    if task is None:
        raise BoardError("task not found on this team's board", code="not_found")
    if task.status != Status.IN_PROGRESS or task.owner_id is None:
        raise BoardError(f"cannot dispatch: the task is {task.status}, not in progress with an owner")
    failed = _breaker(team, task, actor)
    if failed is not None:
        return failed
    attempt = _attempts(task) + 1
    _tasks(team).filter(pk=task.pk).update(metadata={**task.metadata, "dispatch_count": attempt})
    task = board.get_task(team, task.pk)
    payload = _payload(
        team, task, attempt=attempt, reason=reason, feedback=feedback, instructions=instructions
    )
    board.record_event(task, TaskEvent.Type.DISPATCHED, actor, live={"dispatch": payload})
    hooks.dispatched(task, payload)
    return task


@transaction.atomic
def assign_and_dispatch(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    actor: BoardActor,
    reason: str = "assigned",
    feedback: str = "",
    dispatcher: BoardActor | None = None,
    instructions: str = "",
) -> Task:
    """A pending task with an owner goes to that owner, in progress, and is dispatched."""
    task = board.get_task(team, task_id)
    if task.owner is None:
        raise BoardError("the task has no assignee; assign it to a member first", code="invalid")
    failed = _breaker(team, task, dispatcher or actor)
    if failed is not None:
        return failed
    board.assign(team, task.pk, agent=task.owner, actor=actor)
    return dispatch(
        team,
        task.pk,
        actor=dispatcher or actor,
        reason=reason,
        feedback=feedback,
        instructions=instructions,
    )


@transaction.atomic
def retry(
    team: Team,
    task_id: uuid.UUID | str,
    *,
    actor: BoardActor,
    note: str = "",
    instructions: str = "",
    assignee: Agent | None = None,
) -> Task:
    """Reopen a task (stale, failed, cancelled, in review or completed) for its owner, or for
    ``assignee``, and dispatch it again at once, the new ``instructions`` in the dispatch's message; the
    retry starts a fresh count of dispatch attempts. A task without an owner goes back to pending for
    any member to claim."""
    task = board.reset(team, task_id, actor=actor, note=note, instructions=instructions)
    instructions = instructions.strip()
    _tasks(team).filter(pk=task.pk).update(metadata={**task.metadata, "dispatch_count": 0})
    if assignee is not None:
        task = board.reassign(team, task.pk, agent=assignee, actor=actor)
    if task.owner is None:
        return board.get_task(team, task.pk)
    return assign_and_dispatch(
        team, task.pk, actor=actor, reason="retried", feedback=note, instructions=instructions
    )


# --- rounds ---------------------------------------------------------------------------------------------


@dataclass
class Round:
    dispatched: list[Task] = field(default_factory=list)
    failed: list[Task] = field(default_factory=list)
    skipped: list[Task] = field(default_factory=list)  # their owner is busy or got a task this round


def _cycles(tasks: Sequence[tuple[uuid.UUID, list[uuid.UUID]]]) -> set[uuid.UUID]:
    """The tasks that wait on themselves or sit on a cycle of blockers (Kahn's algorithm: whatever is
    left once every task with no open blocker has been peeled off)."""
    waiting = {pk: set(blockers) for pk, blockers in tasks}
    nodes = set(waiting)
    edges = {pk: {b for b in blockers if b in nodes} for pk, blockers in waiting.items()}
    indegree = {pk: len(bs) for pk, bs in edges.items()}
    dependents: dict[uuid.UUID, set[uuid.UUID]] = {pk: set() for pk in nodes}
    for pk, blockers in edges.items():
        for b in blockers:
            dependents[b].add(pk)
    ready = [pk for pk, n in indegree.items() if n == 0]
    while ready:
        pk = ready.pop()
        for dependent in dependents[pk]:
            indegree[dependent] -= 1
            if indegree[dependent] == 0:
                ready.append(dependent)
    return {pk for pk, n in indegree.items() if n > 0}


def _fail_quietly(
    team: Team, task_id: uuid.UUID, message: str, actor: BoardActor, pending: bool
) -> Task | None:
    try:
        with transaction.atomic():
            return board.fail(team, task_id, message=message, actor=actor, pending=pending)
    except BoardError:
        return None  # moved on meanwhile


def fail_impossible(team: Team, *, actor: BoardActor) -> list[Task]:
    """Fail the open tasks whose blockers can never finish: waiting on themselves or on a cycle."""
    open_tasks = list(
        _tasks(team)
        .filter(status__in=[Status.PENDING, Status.BLOCKED])
        .exclude(blocked_by=[])
        .values_list("pk", "blocked_by")[:5000]
    )
    if not open_tasks:
        return []
    failed = []
    by_id = dict(open_tasks)
    for pk in sorted(_cycles(open_tasks)):
        blockers = by_id[pk]
        message = (
            "blocked_by references the task itself"
            if pk in blockers
            else "blocked_by forms a cycle: these tasks wait on each other and none can start"
        )
        task = _fail_quietly(team, pk, message, actor, pending=True)
        if task is not None:
            failed.append(task)
    return failed


def dispatch_round(team: Team, *, actor: BoardActor | None = None) -> Round:
    """One dispatch round of a team: runnable tasks with an owner (pending, or in progress with an
    expired lock; at most 30, highest priority then oldest) go out, one per owner, skipping owners that
    are working on a task. Lead-owned tasks, tasks in a blocker cycle, and tasks past the circuit
    breaker fail."""
    actor = actor or BoardActor.system("dispatch_unblocked")
    result = Round()
    if team.status != Team.Status.ACTIVE:
        return result
    result.failed.extend(fail_impossible(team, actor=actor))
    now = timezone.now()
    runnable = list(
        _tasks(team)
        .filter(owner__isnull=False)
        .filter(Q(status=Status.PENDING) | Q(status=Status.IN_PROGRESS, lock_expires_at__lt=now))
        .select_related("owner")
        .order_by("-priority", "created_at", "id")[:ROUND_LIMIT]
    )
    busy = set(
        _tasks(team)
        .filter(status=Status.IN_PROGRESS, owner__isnull=False)
        .filter(Q(lock_expires_at__isnull=True) | Q(lock_expires_at__gte=now))
        .values_list("owner_id", flat=True)
    )
    for task in runnable:
        try:
            with transaction.atomic():
                outcome = _dispatch_one(team, task, actor=actor, busy=busy)
        except BoardError:
            continue  # changed meanwhile (claimed, cancelled): the next round sees it as it is
        if outcome is None:
            result.skipped.append(task)
        elif outcome.status == Status.FAILED:
            result.failed.append(outcome)
        else:
            result.dispatched.append(outcome)
            busy.add(outcome.owner_id)
    return result


def _dispatch_one(team: Team, task: Task, *, actor: BoardActor, busy: set[Any]) -> Task | None:
    pending = task.status == Status.PENDING
    if task.owner_id == team.lead_id:
        return board.fail(
            team,
            task.pk,
            message="the team lead cannot be dispatched its own task; assign it to a member",
            actor=actor,
            pending=pending,
        )
    if task.owner_id in busy:
        return None
    failed = _breaker(team, task, actor)
    if failed is not None:
        return failed
    if pending:
        reason = "unblocked" if task.metadata.get("original_blocked_by") else "assigned"
        return assign_and_dispatch(team, task.pk, actor=actor, reason=reason)
    board.renew_lock(team, task.pk)
    return dispatch(team, task.pk, actor=actor, reason="recovered")


def after_lead_turn(team: Team) -> Round:
    """After the lead's turn: the tasks it created or reassigned go out (one per member)."""
    return dispatch_round(team, actor=BoardActor.system("post_turn"))


# --- after a member's turn ------------------------------------------------------------------------------


@dataclass
class TurnOutcome:
    action: str  # failed | handled | reviewed | completed | skipped
    task: Task | None
    round: Round


def after_member_turn(
    team: Team,
    *,
    task_id: uuid.UUID | str,
    agent_key: str,
    started_at: datetime,
    content: str = "",
    deliverables: Iterable[str] = (),
    error: str = "",
    loop_detected: bool = False,
) -> TurnOutcome:
    """The post-turn rules of a member's run on a dispatched task (B §2.3), then a dispatch round.

    What the member did during the turn is read from the task's events since ``started_at`` by that
    agent: a completion or a blocker (the tool handled the task) leaves it alone; a submission for
    review renews the lock. Otherwise: a run error fails the task; the loop detector's kill fails it as
    ``Agent run terminated by loop detector``; anything else completes it with the turn's final
    ``content`` (or its ``deliverables`` joined by ``---``; at most 100 000 characters)."""
    outcome = _post_turn(
        team,
        task_id=task_id,
        agent_key=agent_key,
        started_at=started_at,
        content=content,
        deliverables=list(deliverables),
        error=error,
        loop_detected=loop_detected,
    )
    return TurnOutcome(outcome[0], outcome[1], dispatch_round(team))


def _post_turn(
    team: Team,
    *,
    task_id: uuid.UUID | str,
    agent_key: str,
    started_at: datetime,
    content: str,
    deliverables: list[str],
    error: str,
    loop_detected: bool,
) -> tuple[str, Task | None]:
    task = _tasks(team).select_related("owner").filter(pk=task_id).first()
    if task is None or task.owner is None or task.owner.key != agent_key:
        return "skipped", task
    post_turn = BoardActor.system("post_turn")
    try:
        if error:
            with transaction.atomic():
                return "failed", board.fail(team, task.pk, message=error, actor=post_turn)
        done = set(
            TaskEvent.objects.for_tenant(team.tenant)
            .filter(task_id=task.pk, actor_id=agent_key, created_at__gte=started_at)
            .values_list("event_type", flat=True)
        )
        if done & {TaskEvent.Type.COMPLETED, TaskEvent.Type.FAILED}:
            return "handled", task
        if TaskEvent.Type.REVIEWED in done:
            board.renew_lock(team, task.pk)
            return "reviewed", board.get_task(team, task.pk)
        if loop_detected:
            with transaction.atomic():
                return "failed", board.fail(
                    team, task.pk, message=LOOP_DETECTED, actor=BoardActor.system("loop_detector")
                )
        result = content.strip() or DELIVERABLE_SEPARATOR.join(d for d in deliverables if d.strip())
        result = (result or NO_RESULT)[:TURN_RESULT_MAX]
        with transaction.atomic():
            return "completed", board.complete(team, task.pk, result=result, actor=post_turn)
    except BoardError:
        return "skipped", board.get_task(team, task.pk)  # no longer in progress: nothing to settle
