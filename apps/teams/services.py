"""Every write to teams themselves (not their boards): create, settings, members, archive. Each is
atomic, audited, and published on the team's topic and the tenant's ``agents`` topic."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.services import record
from apps.realtime import events
from apps.teams import board, dispatch, team_settings
from apps.teams.board import BoardActor, BoardError, topic
from apps.teams.models import Escalation, Task, Team, TeamMember, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import Agent


def team_data(team: Team) -> dict[str, Any]:
    members = TeamMember.objects.for_tenant(team.tenant).filter(team_id=team.pk).select_related("agent")
    return {
        "id": str(team.pk),
        "name": team.name,
        "description": team.description,
        "lead": team.lead.key,
        "status": team.status,
        "settings": team.settings,
        "members": [{"agent": m.agent.key, "role": m.role} for m in members],
    }


def _check_settings(settings: Any) -> dict[str, Any]:
    errors = team_settings.validate(settings)
    if errors:
        first, messages = next(iter(errors.items()))
        raise ServiceError(ErrorCode.INVALID, f"settings.{first}: {messages[0]}", details=errors)
    return dict(settings)


def _publish(actor: Actor, team: Team, verb: str) -> dict[str, Any]:
    data = team_data(team)
    record(actor=actor, verb=verb, target_type="team", target_id=str(team.pk), data=data)
    events.publish(tenant=actor.tenant, topic=topic(team), type=verb, data=data)
    return data


@transaction.atomic
def team_create(
    *,
    actor: Actor,
    name: str,
    lead: Agent,
    members: Iterable[Agent],
    description: str = "",
    settings: dict[str, Any] | None = None,
) -> Team:
    """A team with its lead and at least one member besides the lead (B §2.1)."""
    name = name.strip()
    if not name or len(name) > 255:
        raise ServiceError(ErrorCode.INVALID, "name: 1 to 255 characters.")
    others = [m for m in dict.fromkeys(members) if m.pk != lead.pk]
    if not others:
        raise ServiceError(ErrorCode.INVALID, "members: a team needs at least one member besides its lead.")
    for agent in (lead, *others):
        if agent.tenant_id != actor.tenant.pk:
            raise ServiceError(ErrorCode.INVALID, "members: agents of this tenant only.")
    settings = _check_settings({"version": 2, **(settings or {})})
    try:
        with transaction.atomic():
            team = Team.objects.create(
                tenant=actor.tenant,
                name=name,
                description=description[:5000],
                lead=lead,
                settings=settings,
                created_by=actor.label[:255],
            )
    except IntegrityError:
        if Team.objects.for_tenant(actor.tenant).filter(lead=lead).exists():
            message = f"{lead.key} already leads a team; an agent leads one team."
            raise Conflict(ErrorCode.CONFLICT, message) from None
        raise Conflict(ErrorCode.CONFLICT, f"A team named {name!r} exists already.") from None
    TeamMember.objects.create(tenant=actor.tenant, team=team, agent=lead, role=TeamMember.Role.LEAD)
    for agent in others:
        TeamMember.objects.create(tenant=actor.tenant, team=team, agent=agent, role=TeamMember.Role.MEMBER)
    _publish(actor, team, "team.created")
    return team


@transaction.atomic
def team_update_settings(*, actor: Actor, team: Team, settings: dict[str, Any]) -> Team:
    """Replace the team's settings (validated; the blocker-escalation toggle lives here)."""
    checked = _check_settings(settings)
    locked = Team.objects.for_tenant(actor.tenant).select_for_update().get(pk=team.pk)
    if locked.settings == checked:
        return locked
    locked.settings = checked
    locked.save(update_fields=["settings", "updated_at"])
    _publish(actor, locked, "team.updated")
    return locked


@transaction.atomic
def member_add(*, actor: Actor, team: Team, agent: Agent) -> TeamMember:
    if agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "agent: an agent of this tenant only.")
    try:
        with transaction.atomic():
            member = TeamMember.objects.create(tenant=actor.tenant, team=team, agent=agent)
    except IntegrityError:
        raise Conflict(ErrorCode.CONFLICT, f"{agent.key} is already a member of {team.name}.") from None
    _publish(actor, team, "team.member_added")
    return member


@transaction.atomic
def member_remove(*, actor: Actor, team: Team, agent: Agent) -> None:
    if agent.pk == team.lead_id:
        raise ServiceError(ErrorCode.INVALID, "The lead cannot be removed; give the team another lead first.")
    membership = TeamMember.objects.for_tenant(actor.tenant).filter(team_id=team.pk, agent_id=agent.pk)
    deleted, _ = membership.delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, f"{agent.key} is not a member of {team.name}.", status=404)
    _publish(actor, team, "team.member_removed")


@transaction.atomic
def team_archive(*, actor: Actor, team: Team) -> Team:
    updated = (
        Team.objects.for_tenant(actor.tenant)
        .filter(pk=team.pk, status=Team.Status.ACTIVE)
        .update(status=Team.Status.ARCHIVED)
    )
    if not updated:
        raise Conflict(ErrorCode.CONFLICT, f"Team {team.name} is already archived.")
    team.refresh_from_db()
    _publish(actor, team, "team.archived")
    return team


@transaction.atomic
def team_update(
    *,
    actor: Actor,
    team: Team,
    name: str | None = None,
    description: str | None = None,
    settings: dict[str, Any] | None = None,
) -> Team:
    """Rename the team, change its description, and (validated, through ``team_update_settings``)
    replace its settings; one audited change per call that changes anything."""
    locked = Team.objects.for_tenant(actor.tenant).select_for_update().select_related("lead").get(pk=team.pk)
    fields: list[str] = []
    if name is not None:
        name = name.strip()
        if not name or len(name) > 255:
            raise ServiceError(ErrorCode.INVALID, "name: 1 to 255 characters.")
        if name != locked.name:
            locked.name = name
            fields.append("name")
    if description is not None:
        if len(description) > 5000:
            raise ServiceError(ErrorCode.INVALID, "description: at most 5000 characters.")
        if description != locked.description:
            locked.description = description
            fields.append("description")
    if fields:
        try:
            with transaction.atomic():
                locked.save(update_fields=[*fields, "updated_at"])
        except IntegrityError:
            raise Conflict(ErrorCode.CONFLICT, f"A team named {locked.name!r} exists already.") from None
        _publish(actor, locked, "team.updated")
    if settings is not None:
        locked = team_update_settings(actor=actor, team=locked, settings=settings)
    return locked


def grant_data(grant: TeamUserGrant) -> dict[str, Any]:
    return {
        "id": str(grant.pk),
        "team": str(grant.team_id),
        "user_id": grant.user_id,
        "role": grant.role,
        "granted_by": grant.granted_by,
        "created_at": grant.created_at.isoformat() if grant.created_at else None,
    }


def _publish_grant(actor: Actor, team: Team, grant: TeamUserGrant, verb: str) -> None:
    data = grant_data(grant)
    record(actor=actor, verb=verb, target_type="team_user_grant", target_id=str(grant.pk), data=data)
    events.publish(tenant=actor.tenant, topic=topic(team), type=verb, data=data)


@transaction.atomic
def grant_create(*, actor: Actor, team: Team, user_id: str, role: str) -> TeamUserGrant:
    """Let a human (a dashboard user or an external user id) view or act on the team's board."""
    user_id = user_id.strip()
    if not user_id or len(user_id) > 255:
        raise ServiceError(ErrorCode.INVALID, "user_id: 1 to 255 characters.")
    if role not in TeamUserGrant.Role.values:
        raise ServiceError(ErrorCode.INVALID, f"role: one of {', '.join(TeamUserGrant.Role.values)}.")
    grant = TeamUserGrant(
        tenant=actor.tenant, team=team, user_id=user_id, role=role, granted_by=actor.label[:255]
    )
    grant.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            grant.save()
    except IntegrityError:
        raise Conflict(ErrorCode.CONFLICT, f"{user_id} already has a grant on {team.name}.") from None
    _publish_grant(actor, team, grant, "team.grant_created")
    return grant


@transaction.atomic
def grant_delete(*, actor: Actor, team: Team, grant: TeamUserGrant) -> None:
    """Withdraw a human's grant on the team."""
    deleted, _ = TeamUserGrant.objects.for_tenant(actor.tenant).filter(pk=grant.pk, team_id=team.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "No grant with this id on this team.", status=404)
    _publish_grant(actor, team, grant, "team.grant_deleted")


# --- humans on the board ------------------------------------------------------------------------------
#
# A human (dashboard user or API key) acts on the board through the same state machine as agents, as a
# ``human`` board actor; each action is also written to the tenant's audit log, in its transaction. The
# review workflow matches the team_tasks tool's: approving or rejecting leaves a comment, reviewed work
# sent back goes to its owner again with the feedback, and work that becomes runnable for an owner is
# dispatched at once (``task.dispatched``).


def human_actor(actor: Actor) -> BoardActor:
    """How a human appears on the board: the user's email, or ``api-key:<prefix>`` for an API key."""
    if actor.kind == "user" and actor.user is not None:
        return BoardActor.human(str(getattr(actor.user, "email", "") or actor.user.get_username()))
    if actor.kind == "api_key" and actor.api_key is not None:
        return BoardActor.human(f"api-key:{actor.api_key.prefix}")
    return BoardActor.system("api")


def _audit_task(actor: Actor, verb: str, team: Team, task_id: Any, **data: Any) -> None:
    record(
        actor=actor,
        verb=f"team.task.{verb}",
        target_type="team_task",
        target_id=str(task_id),
        data={"team": str(team.pk), **data},
    )


def _state(task: Task) -> dict[str, Any]:
    return {"identifier": task.identifier, "status": task.status}


def _dispatch_if_runnable(
    team: Team, task: Task, who: BoardActor, *, reason: str, feedback: str = ""
) -> Task:
    """A pending task with a member as owner goes to that owner now (the lead is never dispatched)."""
    if task.status == Task.Status.PENDING and task.owner_id is not None and task.owner_id != team.lead_id:
        return dispatch.assign_and_dispatch(team, task.pk, actor=who, reason=reason, feedback=feedback)
    return task


@transaction.atomic
def task_remember_original_blockers(*, team: Team, task: Task, blocked_by: list[str]) -> None:
    """Add ``blocked_by`` to the blockers the task's metadata keeps as first given (each once, in order)."""
    original = [*task.metadata.get("original_blocked_by", []), *blocked_by]
    Task.objects.for_tenant(team.tenant).filter(pk=task.pk).update(
        metadata={**task.metadata, "original_blocked_by": list(dict.fromkeys(original))}
    )


def task_create(*, actor: Actor, team: Team, owner: Agent | None = None, **fields: Any) -> Task:
    """A task created by a human; one with an owner is dispatched to it at once when it can start."""
    who = human_actor(actor)
    task = board.create_task(team, actor=who, owner=owner, **fields)
    task = _dispatch_if_runnable(team, task, who, reason="assigned")
    _audit_task(actor, "created", team, task.pk, subject=task.subject, **_state(task))
    return task


@transaction.atomic
def task_update(*, actor: Actor, team: Team, task_id: Any, **changes: Any) -> Task:
    task = board.update(team, task_id, actor=human_actor(actor), **changes)
    _audit_task(actor, "updated", team, task.pk, fields=sorted(changes), **_state(task))
    return task


@transaction.atomic
def task_delete(*, actor: Actor, team: Team, task_id: Any) -> None:
    task = board.get_task(team, task_id)
    board.delete(team, task.pk, actor=human_actor(actor))
    _audit_task(actor, "deleted", team, task.pk, identifier=task.identifier, subject=task.subject[:200])


@transaction.atomic
def task_assign(*, actor: Actor, team: Team, task_id: Any, agent: Agent) -> Task:
    """A pending task goes to a member, in progress, and is dispatched to it."""
    who = human_actor(actor)
    task = board.assign(team, task_id, agent=agent, actor=who)
    task = dispatch.dispatch(team, task.pk, actor=who, reason="assigned")
    _audit_task(actor, "assigned", team, task.pk, agent=agent.key, **_state(task))
    return task


@transaction.atomic
def task_cancel(*, actor: Actor, team: Team, task_id: Any, reason: str) -> Task:
    task = board.cancel(team, task_id, reason=reason, actor=human_actor(actor))
    _audit_task(actor, "cancelled", team, task.pk, reason=reason, **_state(task))
    return task


@transaction.atomic
def task_retry(*, actor: Actor, team: Team, task_id: Any, note: str = "", instructions: str = "") -> Task:
    """Reopen a stale, failed, cancelled, in-review or completed task and dispatch it to its owner again
    with the note and the new instructions (a task without an owner goes back to pending for any member
    to claim, and finds the instructions among its comments)."""
    if not isinstance(instructions, str) or len(instructions) > board.INSTRUCTIONS_MAX_CHARS:
        raise BoardError(f"instructions: at most {board.INSTRUCTIONS_MAX_CHARS} characters", code="invalid")
    instructions = instructions.strip()
    task = board.get_task(team, task_id)
    if task.owner_id is not None and task.owner_id == team.lead_id:
        raise BoardError(
            "cannot retry: the task belongs to the team lead, who is never dispatched tasks; assign it "
            "to a member instead"
        )
    who = human_actor(actor)
    task = dispatch.retry(team, task.pk, actor=who, note=note, instructions=instructions)
    if instructions:
        # Commented after the dispatch, so the message carries them once (whole), not also among the
        # recent comments cut short; the comment keeps them on the task for whoever works it next.
        text = f"Retry instructions: {instructions}".encode()[: board.COMMENT_MAX_BYTES]
        board.comment(team, task.pk, actor=who, text=text.decode(errors="ignore"))
        task = board.get_task(team, task.pk)
    _audit_task(actor, "retried", team, task.pk, note=note, instructions=instructions, **_state(task))
    return task


@transaction.atomic
def task_approve(*, actor: Actor, team: Team, task_id: Any) -> Task:
    """Reviewed work is completed; a task that waited for approval before it ran becomes pending (and
    goes to its owner at once). A comment records the approval."""
    who = human_actor(actor)
    task = board.approve(team, task_id, actor=who)
    board.comment(team, task.pk, actor=who, text=f"Task approved (status: {task.status}).")
    task = _dispatch_if_runnable(team, board.get_task(team, task.pk), who, reason="assigned")
    _audit_task(actor, "approved", team, task.pk, **_state(task))
    return task


@transaction.atomic
def task_reject(*, actor: Actor, team: Team, task_id: Any, reason: str) -> Task:
    """A comment records the rejection; work with an owner goes back to that owner with the reason as
    feedback, and a task without one is cancelled (its dependents unblocked)."""
    who = human_actor(actor)
    task = board.get_task(team, task_id)
    if task.status != Task.Status.IN_REVIEW:
        raise BoardError(f"cannot reject: the task is {task.status}, not in_review")
    board.comment(team, task.pk, actor=who, text=f"Task rejected. Reason: {reason}")
    if task.owner_id is not None and task.owner_id != team.lead_id:
        board.send_back(team, task.pk, reason=reason, actor=who)
        task = dispatch.assign_and_dispatch(team, task.pk, actor=who, reason="rejected", feedback=reason)
    else:
        task = board.reject(team, task.pk, reason=reason, actor=who)
    _audit_task(actor, "rejected", team, task.pk, reason=reason, **_state(task))
    return task


@transaction.atomic
def task_comment(*, actor: Actor, team: Team, task_id: Any, text: str, kind: str) -> board.Commented:
    """A note, or a blocker (which fails an in-progress task and escalates, see ``board.comment``)."""
    done = board.comment(team, task_id, actor=human_actor(actor), text=text, kind=kind)
    _audit_task(
        actor, "commented", team, done.task.pk, comment_type=kind, failed=done.failed, **_state(done.task)
    )
    return done


@transaction.atomic
def escalation_resolve(*, actor: Actor, team: Team, escalation_id: Any) -> Escalation:
    escalation = board.resolve_escalation(team, escalation_id, actor=human_actor(actor))
    record(
        actor=actor,
        verb="team.escalation.resolved",
        target_type="team_escalation",
        target_id=str(escalation.pk),
        data={"team": str(team.pk), "task": str(escalation.task_id)},
    )
    return escalation
