"""The ``team_tasks`` and ``team_message`` tools (SPEC Part A "Teams", B §2.4, §2.5, §2.9).

The calling agent's team is the one it leads, else the first it joined ("this agent is not part of any
team" without one). Permissions follow B §2.4: lead-only actions pass for the lead and for calls on the
internal ``teammate`` and ``system`` channels; approve and reject also pass on ``dashboard``; owner-only
actions check the task's owner. Every refusal is an error result written for the model to act on;
state changes go through ``apps.teams.board`` (guarded, audited as task events, published live),
``apps.teams.dispatch`` and ``apps.teams.mailbox``.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.teams import board, dispatch, mailbox, selectors, services, team_settings
from apps.teams.access import access_refusal
from apps.teams.board import BoardActor, BoardError
from apps.teams.models import Task, TaskComment, Team
from apps.teams.selectors import SelectorError
from apps.tenants.models import Agent
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.tools.catalog import TEAM_MESSAGE_ACTIONS, TEAM_TASK_ACTIONS

Status = Task.Status

TASK_ACTIONS = TEAM_TASK_ACTIONS
MESSAGE_ACTIONS = TEAM_MESSAGE_ACTIONS
LEAD_CHANNELS = ("teammate", "system")
APPROVER_CHANNELS = ("teammate", "system", "dashboard")
INTERNAL_CHANNELS = board.INTERNAL_CHANNELS
RETRY_FROM = (Status.STALE, Status.FAILED, Status.CANCELLED, Status.COMPLETED)
COMPOUND_VERBS = ("implement", "create", "build", "design", "write", "develop")
FRONTMATTER_CHARS = 80


class Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class TeamCall:
    ctx: CallContext
    team: Team
    args: dict[str, Any]

    @property
    def agent(self) -> Agent:
        return self.ctx.agent

    @property
    def actor(self) -> BoardActor:
        return BoardActor.of_agent(self.ctx.agent)

    @property
    def is_lead(self) -> bool:
        return self.agent.pk == self.team.lead_id or self.ctx.channel in LEAD_CHANNELS

    def require_lead(self) -> None:
        if not self.is_lead:
            raise Refused("only the team lead can perform this action")

    def text(self, name: str, default: str = "") -> str:
        value = self.args.get(name, default)
        return value if isinstance(value, str) else default

    def task(self) -> Task:
        """The task named by ``task_id`` on this team's board."""
        raw = self.args.get("task_id")
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise Refused("task_id is required")
        try:
            ident = uuid.UUID(str(raw).strip())
        except ValueError:
            raise Refused(
                f'invalid task_id "{str(raw)[:60]}" — use the UUID from task list, not the task number'
            ) from None
        task = selectors.task_get(team=self.team, task_id=ident)
        if task is None:
            raise Refused(f"task {ident} not found: it does not exist or does not belong to your team")
        return task

    def member(self, key: str) -> Agent:
        membership = selectors.member_by_key(team=self.team, key=key)
        if membership is None:
            names = ", ".join(self.member_keys(lead=False)) or "none"
            raise Refused(f"{key[:64]!r} is not a member of team {self.team.name} (members: {names})")
        return membership.agent

    def member_keys(self, *, lead: bool) -> list[str]:
        return selectors.member_keys(team=self.team, lead=lead)

    def owns(self, task: Task) -> bool:
        return task.owner_id == self.agent.pk

    def user_filter(self) -> str:
        """External channels see only their user's tasks; internal ones see everyone's."""
        return "" if self.ctx.channel in INTERNAL_CHANNELS else self.ctx.user_id


def _team_of(ctx: CallContext) -> Team | None:
    team = selectors.team_for_agent(tenant=ctx.tenant, agent=ctx.agent)
    if team is None:
        return None
    return selectors.team_with_lead(tenant=ctx.tenant, team_id=team.pk)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _ref(task: Task) -> str:
    return f'#{task.number} "{task.subject}" ({task.identifier}, id {task.pk})'


def _run(
    ctx: CallContext, args: dict[str, Any], actions: dict[str, Callable[[TeamCall], ToolResult]]
) -> ToolResult:
    action = args.get("action")
    handler = actions.get(action) if isinstance(action, str) else None
    if handler is None:
        return ToolResult.error(f"unknown action: {str(action)[:40]} (use {', '.join(actions)})")
    team = _team_of(ctx)
    if team is None:
        return ToolResult.error("this agent is not part of any team")
    refusal = access_refusal(
        team.settings or {}, user_id=ctx.user_id, channel=ctx.channel, team_name=team.name
    )
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        # One action is all or nothing (a rejection's comment and its sending back, for instance); its
        # live events go out once it commits.
        with transaction.atomic():
            return handler(TeamCall(ctx=ctx, team=team, args=args))
    except Refused as exc:
        return ToolResult.error(exc.message)
    except (BoardError, SelectorError) as exc:
        return ToolResult.error(getattr(exc, "message", None) or str(exc))


# --- team_tasks -----------------------------------------------------------------------------------------


def _blocker_row(ident: uuid.UUID, blocker: Task | None) -> dict[str, Any]:
    owner = blocker.owner if blocker is not None else None
    return {
        "id": str(ident),
        "subject": blocker.subject if blocker is not None else None,
        "status": blocker.status if blocker is not None else None,
        "owner_agent_key": owner.key if owner is not None else None,
    }


def _task_row(task: Task, blockers: dict[uuid.UUID, Task]) -> dict[str, Any]:
    return {
        "id": str(task.pk),
        "identifier": task.identifier,
        "number": task.number,
        "subject": task.subject,
        "status": task.status,
        "priority": task.priority,
        "task_type": task.task_type,
        "owner_agent_key": task.owner.key if task.owner else None,
        "owner_display_name": task.owner.name if task.owner else None,
        "created_by_agent_key": task.created_by_agent.key if task.created_by_agent else None,
        "progress_percent": task.progress_percent,
        "progress_step": task.progress_step or None,
        "blocked_by": [_blocker_row(b, blockers.get(b)) for b in task.blocked_by],
        "created_at": task.created_at.isoformat(),
    }


def _creation_guide(call: TeamCall) -> str:
    members = selectors.members_besides_lead(team=call.team)
    lines = ["[Task creation guide] Assign tasks to one of these members (never to yourself):"]
    for m in members:
        about = " ".join((m.agent.description or m.agent.name).split())
        about = about if len(about) <= FRONTMATTER_CHARS else about[:FRONTMATTER_CHARS] + "…"
        model = f" [{m.agent.model}]" if m.agent.model else ""
        lines.append(f"- {m.agent.key}{model}: {about}")
    return "\n".join(lines)


def _list(call: TeamCall) -> ToolResult:
    status = call.text("status")
    page = call.args.get("page", 1)
    shared = team_settings.shared_workspace(call.team.settings or {})
    result = selectors.task_list(
        team=call.team,
        status=status,
        page=page,
        chat_id=None if shared else call.ctx.chat_id,
        user_id=call.user_filter(),
    )
    body: dict[str, Any] = {
        "tasks": [_task_row(t, result.blockers) for t in result.tasks],
        "count": len(result.tasks),
        "page": result.page,
    }
    if result.has_more:
        body["has_more"] = True
    if call.is_lead:
        body["hint"] = _creation_guide(call)
    summary = f"{len(result.tasks)} task(s) on page {result.page}" + (
        ", more on the next page" if result.has_more else ""
    )
    return ToolResult.ok(_json(body), for_user=summary)


def _get(call: TeamCall) -> ToolResult:
    task = call.task()
    detail = selectors.task_detail(team=call.team, task_id=task.pk)
    assert detail is not None
    body = {
        **_task_row(task, detail.blockers),
        "description": task.description,
        "result": detail.result or None,
        "channel": task.channel,
        "chat_id": task.chat_id,
        "require_approval": task.require_approval,
        "followup": (
            {
                "message": task.followup_message,
                "at": task.followup_at.isoformat() if task.followup_at else None,
                "count": task.followup_count,
                "max": task.followup_max,
            }
            if task.followup_message
            else None
        ),
        "comments": [
            {
                "agent_key": c.agent.key if c.agent else None,
                "user_id": c.user_id or None,
                "type": c.comment_type,
                "content": c.content,
                "created_at": c.created_at.isoformat(),
            }
            for c in detail.comments
        ],
        "events": [
            {"event_type": e.event_type, "actor_id": e.actor_id, "created_at": e.created_at.isoformat()}
            for e in detail.events
        ],
        "attachments": [{"path": a.path, "file_size": a.file_size} for a in detail.attachments],
    }
    return ToolResult.ok(_json(body), for_user=f"Task {task.identifier}: {task.subject} ({task.status})")


def _search(call: TeamCall) -> ToolResult:
    query = call.text("query")
    if not query.strip():
        raise Refused("query is required")
    result = selectors.task_search(team=call.team, query=query, user_id=call.user_filter())
    body: dict[str, Any] = {
        "results": [
            {
                "id": str(h.task.pk),
                "identifier": h.task.identifier,
                "subject": h.task.subject,
                "status": h.task.status,
                "owner_agent_key": h.task.owner.key if h.task.owner else None,
                "score": round(h.score, 4),
            }
            for h in result.hits
        ],
        "count": len(result.hits),
        "mode": result.mode,
    }
    if result.mode == "fts":
        body["note"] = "full-text search only (no embedding provider configured)"
    return ToolResult.ok(_json(body), for_user=f"{len(result.hits)} matching task(s)")


def _blocked_by(call: TeamCall) -> list[str] | None:
    raw = call.args.get("blocked_by")
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list):
        raise Refused("blocked_by must be a list of task ids (UUIDs from task list)")
    return [str(item) for item in raw]


def _compound_warning(subject: str) -> str:
    lowered = f" {subject.lower()} "
    if " and " in lowered and any(verb in lowered for verb in COMPOUND_VERBS):
        return (
            "\n\nWarning: this subject looks like several pieces of work in one task. Split it into "
            "separate tasks (one deliverable each) so members can work on them in parallel."
        )
    return ""


def _create(call: TeamCall) -> ToolResult:
    task_type = call.text("task_type") or "general"
    if not call.is_lead:
        enabled, _ = team_settings.member_requests(call.team.settings or {})
        if not enabled:
            raise Refused('Members cannot create tasks. Use team_tasks(action="comment") to communicate.')
        if task_type != "request":
            raise Refused(
                'Members can only create task_type="request" tasks (a request to the lead); use '
                'team_tasks(action="comment") for anything else.'
            )
    subject = call.text("subject")
    if not subject.strip():
        raise Refused("subject is required")
    owner = None
    assignee = call.text("assignee").strip()
    if assignee:
        owner = call.member(assignee)
        if owner.pk == call.team.lead_id:
            raise Refused(
                "team lead cannot assign tasks to itself — assign the task to a member, or do the work "
                "yourself without a task"
            )
    blocked_by = _blocked_by(call) or []
    metadata: dict[str, Any] = {"origin_sender": call.agent.key}
    if blocked_by:
        metadata["original_blocked_by"] = blocked_by
    if call.ctx.peer_kind:
        metadata["peer_kind"] = call.ctx.peer_kind
    if call.ctx.session_key:
        metadata["session_key"] = call.ctx.session_key
    priority = call.args.get("priority", 0)
    task = board.create_task(
        call.team,
        actor=call.actor,
        subject=subject,
        description=call.text("description"),
        priority=priority,
        blocked_by=blocked_by,
        owner=owner,
        require_approval=call.args.get("require_approval") is True,
        task_type=task_type,
        user_id=call.ctx.user_id,
        channel=call.ctx.channel,
        chat_id=call.ctx.chat_id,
        metadata=metadata,
    )
    dispatched = ""
    _, auto_dispatch = team_settings.member_requests(call.team.settings or {})
    if task.status == Status.PENDING and owner is not None and (call.is_lead or auto_dispatch):
        dispatch.dispatch_round(call.team, actor=BoardActor.system("dispatch"))
        task = board.get_task(call.team, task.pk)
        if task.status == Status.IN_PROGRESS:
            dispatched = f" Dispatched to {owner.key}."
        elif task.status == Status.PENDING:
            dispatched = f" {owner.key} is busy; it goes out when their current task ends."
    who = owner.key if owner is not None else "none (any member may claim it)"
    text = (
        f"Task created: {task.subject} (id={task.pk}, task_number={task.number}, "
        f"identifier={task.identifier}, status={task.status}, assignee={who}).{dispatched}"
    )
    return ToolResult.ok(text + _compound_warning(task.subject), id=str(task.pk), status=task.status)


def _claim(call: TeamCall) -> ToolResult:
    task = call.task()
    board.claim(call.team, task.pk, agent=call.agent, actor=call.actor)
    return ToolResult.ok(f"Task {task.pk} claimed successfully. It is now in progress.")


def _resume_own(call: TeamCall, task: Task) -> Task:
    """A task of the caller that went back to pending (its lock expired) is taken up again."""
    if task.status == Status.PENDING and task.owner_id is None:
        return board.claim(call.team, task.pk, agent=call.agent, actor=call.actor)
    if task.status == Status.PENDING and call.owns(task):
        return board.assign(call.team, task.pk, agent=call.agent, actor=call.actor)
    return task


def _complete(call: TeamCall) -> ToolResult:
    result = call.text("result")
    if not result.strip():
        raise Refused("result is required: say what was done and what was found")
    task = call.task()
    try:
        task = _resume_own(call, task)
    except BoardError:
        task = board.get_task(call.team, task.pk)
    try:
        board.complete(call.team, task.pk, result=result, actor=call.actor)
    except BoardError as exc:
        current = board.get_task(call.team, task.pk)
        if current.status == Status.COMPLETED:
            return ToolResult.ok(f"Task {task.pk} is already completed.")
        if current.status in (Status.FAILED, Status.CANCELLED):
            return ToolResult.error(f"Task {task.pk} is {current.status} — cannot complete.")
        raise Refused(exc.message) from None
    return ToolResult.ok(
        f"Task {task.pk} completed. Dependent tasks will be dispatched after this turn ends."
    )


def _cancel(call: TeamCall) -> ToolResult:
    call.require_lead()
    task = call.task()
    reason = call.text("text").strip() or "Cancelled by agent"
    if len(reason) > board.REASON_MAX_CHARS:
        raise Refused(f"text (the reason) is longer than {board.REASON_MAX_CHARS} characters")
    board.cancel(call.team, task.pk, reason=reason, actor=call.actor)
    return ToolResult.ok(f"Task {_ref(task)} cancelled: {reason}")


def _assign(call: TeamCall) -> ToolResult:
    call.require_lead()
    task = call.task()
    assignee = call.text("assignee").strip()
    if not assignee:
        raise Refused("assignee is required (the agent key of a team member)")
    agent = call.member(assignee)
    if agent.pk == call.team.lead_id:
        raise Refused("team lead cannot assign tasks to itself — assign the task to a member")
    board.reassign(call.team, task.pk, agent=agent, actor=call.actor)
    task = board.get_task(call.team, task.pk)
    if task.status == Status.PENDING:
        task = dispatch.assign_and_dispatch(call.team, task.pk, actor=call.actor, reason="assigned")
        return ToolResult.ok(
            f"Task {_ref(task)} assigned to {agent.key} and dispatched (status: {task.status})."
        )
    return ToolResult.ok(f"Task {_ref(task)} assigned to {agent.key}; it starts once its blockers finish.")


def _review(call: TeamCall) -> ToolResult:
    task = call.task()
    if not call.owns(task):
        raise Refused("only the task owner can submit for review")
    board.review(call.team, task.pk, actor=call.actor)
    return ToolResult.ok(
        f"Task {_ref(task)} submitted for review. The lead (or a human) will approve or reject it."
    )


def _require_approver(call: TeamCall) -> None:
    if call.agent.pk != call.team.lead_id and call.ctx.channel not in APPROVER_CHANNELS:
        raise Refused("only the team lead can perform this action")


def _approve(call: TeamCall) -> ToolResult:
    _require_approver(call)
    task = call.task()
    task = board.approve(call.team, task.pk, actor=call.actor)
    board.comment(call.team, task.pk, actor=call.actor, text=f"Task approved (status: {task.status}).")
    text = f"Task {_ref(task)} approved (status: {task.status})."
    if task.status == Status.PENDING and task.owner is not None:
        task = dispatch.assign_and_dispatch(call.team, task.pk, actor=call.actor, reason="assigned")
        text += f" Dispatched to {task.owner.key if task.owner else '?'}."
    return ToolResult.ok(text, status=task.status)


def _reject(call: TeamCall) -> ToolResult:
    _require_approver(call)
    task = call.task()
    reason = call.text("text").strip() or "Rejected by user"
    if len(reason) > board.REASON_MAX_CHARS:
        raise Refused(f"text (the reason) is longer than {board.REASON_MAX_CHARS} characters")
    if task.status != Status.IN_REVIEW:
        raise Refused(f"cannot reject: the task is {task.status}, not in_review")
    board.comment(call.team, task.pk, actor=call.actor, text=f"Task rejected. Reason: {reason}")
    if task.owner is not None:
        try:
            board.send_back(call.team, task.pk, reason=reason, actor=call.actor)
        except BoardError:
            pass  # no longer in review: fall back to rejecting it outright below
        else:
            task = dispatch.assign_and_dispatch(
                call.team, task.pk, actor=call.actor, reason="rejected", feedback=reason
            )
            owner = task.owner.key if task.owner else "?"
            return ToolResult.ok(
                f"Task {_ref(task)} rejected and sent back to {owner} with the feedback "
                f"(status: {task.status}).",
                status=task.status,
            )
    task = board.reject(call.team, task.pk, reason=reason, actor=call.actor)
    return ToolResult.ok(f"Task {_ref(task)} rejected and cancelled: {reason}", status=task.status)


def _comment(call: TeamCall) -> ToolResult:
    task = call.task()
    kind = TaskComment.Type.BLOCKER if call.text("type") == "blocker" else TaskComment.Type.NOTE
    done = board.comment(call.team, task.pk, actor=call.actor, text=call.text("text"), kind=kind)
    text = done.message
    if kind == TaskComment.Type.NOTE and call.agent.pk == call.team.lead_id:
        if task.status == Status.IN_PROGRESS:
            text += (
                " Note: the assignee won't see this comment while working; to change the instructions, "
                'use team_tasks(action="retry") once the task is done or failed.'
            )
        elif task.status in (Status.COMPLETED, Status.FAILED):
            text += (
                f" The task is {task.status}; to have it redone with this feedback, use "
                'team_tasks(action="retry").'
            )
    return ToolResult.ok(text, failed=done.failed)


def _progress(call: TeamCall) -> ToolResult:
    task = call.task()
    if not call.owns(task):
        raise Refused("only the task owner can report progress")
    percent = call.args.get("percent")
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise Refused("percent must be 0-100")
    if task.status in board.TERMINAL:
        return ToolResult.ok(f"Task already {task.status} — progress update skipped.")
    with contextlib.suppress(BoardError):
        task = _resume_own(call, task)
    task = board.progress(call.team, task.pk, percent=percent, step=call.text("step"), actor=call.actor)
    step = f" {task.progress_step}" if task.progress_step else ""
    return ToolResult.ok(f"Progress updated: {task.progress_percent}%{step}")


def _attach(call: TeamCall) -> ToolResult:
    raw = call.text("path").strip()
    if not raw:
        raise Refused("path is required (a file in your workspace)")
    if "\x00" in raw or len(raw) > 4096:
        raise Refused("path is not a valid file path")
    task = call.task()
    workspace = os.path.normpath(str(call.ctx.workspace))
    path = os.path.normpath(raw if os.path.isabs(raw) else os.path.join(workspace, raw))
    size = 0
    if path == workspace or path.startswith(workspace + os.sep):
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0
    task, created = board.attach(call.team, task.pk, path=path, actor=call.actor, file_size=size)
    if not created:
        return ToolResult.ok(f"{path} is already attached to task {_ref(task)}.")
    return ToolResult.ok(f"Attached {path} to task {_ref(task)}.")


def _ask_user(call: TeamCall) -> ToolResult:
    task = call.task()
    if not call.owns(task):
        raise Refused("only the task owner can ask the user")
    question = call.text("text")
    if not question.strip():
        raise Refused("text is required (the question for the user)")
    task = board.ask_user(
        call.team,
        task.pk,
        question=question,
        actor=call.actor,
        channel=call.ctx.channel,
        chat_id=call.ctx.chat_id,
    )
    minutes = team_settings.followup_interval_minutes(call.team.settings or {})
    limit = f", at most {task.followup_max} times" if task.followup_max else ""
    return ToolResult.ok(
        f"Follow-up set on task {_ref(task)}: the user is reminded on {task.followup_channel} every "
        f'{minutes} minutes{limit} until you call team_tasks(action="clear_ask_user").'
    )


def _clear_ask_user(call: TeamCall) -> ToolResult:
    task = call.task()
    if not call.owns(task) and not call.is_lead:
        raise Refused("only the task owner or the team lead can clear a follow-up")
    task, had = board.clear_ask_user(call.team, task.pk, actor=call.actor)
    if not had:
        return ToolResult.ok(f"Task {_ref(task)} has no follow-up to clear.")
    return ToolResult.ok(f"Follow-up cleared on task {_ref(task)}; no more reminders.")


def _update(call: TeamCall) -> ToolResult:
    call.require_lead()
    task = call.task()
    subject = call.args.get("subject")
    description = call.args.get("description")
    priority = call.args.get("priority")
    blocked_by = _blocked_by(call)
    if subject is None and description is None and priority is None and blocked_by is None:
        raise Refused("no updates provided (set subject, description, priority or blocked_by)")
    task = board.update(
        call.team,
        task.pk,
        actor=call.actor,
        subject=subject,
        description=description,
        priority=priority,
        blocked_by=blocked_by,
    )
    if blocked_by:
        services.task_remember_original_blockers(team=call.team, task=task, blocked_by=blocked_by)
    changed = [
        name
        for name, value in (
            ("subject", subject),
            ("description", description),
            ("priority", priority),
            ("blocked_by", blocked_by),
        )
        if value is not None
    ]
    return ToolResult.ok(f"Task {_ref(task)} updated ({', '.join(changed)}); status stays {task.status}.")


def _retry(call: TeamCall) -> ToolResult:
    call.require_lead()
    task = call.task()
    if task.status not in RETRY_FROM:
        raise Refused(
            f"cannot retry: the task is {task.status}; only stale, failed, cancelled or completed tasks "
            "can be retried"
        )
    assignee = call.text("assignee").strip()
    if assignee:
        agent = call.member(assignee)
        if agent.pk == call.team.lead_id:
            raise Refused("team lead cannot assign tasks to itself — retry with a member as assignee")
    elif task.owner_id == call.team.lead_id:
        raise Refused(
            "cannot retry: the task belongs to the team lead, who is never dispatched tasks; retry it "
            "with assignee=<member>"
        )
    note = call.text("text").strip()
    if len(note) > board.REASON_MAX_CHARS:
        raise Refused(f"text (the new instructions) is longer than {board.REASON_MAX_CHARS} characters")
    task = dispatch.retry(
        call.team, task.pk, actor=call.actor, note=note, assignee=call.member(assignee) if assignee else None
    )
    if task.owner is None:
        return ToolResult.ok(
            f"Task {_ref(task)} reopened (pending); any member may claim it.", status=task.status
        )
    return ToolResult.ok(
        f"Task {_ref(task)} reopened and dispatched to {task.owner.key} (status: {task.status}).",
        status=task.status,
    )


_TASK_HANDLERS: dict[str, Callable[[TeamCall], ToolResult]] = {
    "create": _create,
    "list": _list,
    "get": _get,
    "claim": _claim,
    "complete": _complete,
    "cancel": _cancel,
    "assign": _assign,
    "review": _review,
    "approve": _approve,
    "reject": _reject,
    "comment": _comment,
    "progress": _progress,
    "attach": _attach,
    "ask_user": _ask_user,
    "clear_ask_user": _clear_ask_user,
    "search": _search,
    "update": _update,
    "retry": _retry,
}
assert tuple(_TASK_HANDLERS) == TASK_ACTIONS


@tool("team_tasks")
def team_tasks(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The team's task board (one action per call)."""
    return _run(ctx, args, _TASK_HANDLERS)


# --- team_message ---------------------------------------------------------------------------------------


def _media(call: TeamCall) -> list[str]:
    raw = call.args.get("media") or []
    if not isinstance(raw, list):
        raise Refused("media must be a list of file paths")
    return [str(item) for item in raw]


def _send(call: TeamCall) -> ToolResult:
    to = call.text("to").strip()
    if not to:
        raise Refused("to is required (the agent key of a teammate)")
    if not call.text("text").strip():
        raise Refused("text is required")
    message = mailbox.send(
        call.team,
        actor=call.ctx.actor,
        sender=call.agent,
        to=to,
        text=call.text("text"),
        media=_media(call),
        channel=call.ctx.channel,
        chat_id=call.ctx.chat_id,
        user_id=call.ctx.user_id,
    )
    return ToolResult.ok(f"Message sent to {to}.", id=str(message.pk), task=str(message.task_id))


def _broadcast(call: TeamCall) -> ToolResult:
    call.require_lead()
    if not call.text("text").strip():
        raise Refused("text is required")
    message, recipients = mailbox.broadcast(
        call.team, actor=call.ctx.actor, sender=call.agent, text=call.text("text"), media=_media(call)
    )
    return ToolResult.ok("Broadcast sent to all teammates.", id=str(message.pk), recipients=recipients)


def _read(call: TeamCall) -> ToolResult:
    inbox = mailbox.read(call.team, actor=call.ctx.actor, agent=call.agent)
    body: dict[str, Any] = {
        "messages": [
            {
                "id": str(m.pk),
                "from": m.from_agent.key if m.from_agent else None,
                "type": m.message_type,
                "content": m.content,
                "task_id": str(m.task_id) if m.task_id else None,
                "created_at": m.created_at.isoformat(),
            }
            for m in inbox.messages
        ],
        "count": len(inbox.messages),
    }
    if inbox.has_more:
        body["has_more"] = True
        body["note"] = f"Showing the oldest {mailbox.READ_BATCH} unread messages; read again for more."
    return ToolResult.ok(_json(body), for_user=f"{len(inbox.messages)} unread message(s)")


_MESSAGE_HANDLERS: dict[str, Callable[[TeamCall], ToolResult]] = {
    "send": _send,
    "broadcast": _broadcast,
    "read": _read,
}


@tool("team_message")
def team_message(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The team mailbox: send to a teammate, broadcast (lead only), read unread messages."""
    return _run(ctx, args, _MESSAGE_HANDLERS)
