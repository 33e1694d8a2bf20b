"""The team mailbox (SPEC B §2.9, with SPEC Part A's per-recipient read state): direct messages,
broadcasts from the lead, and reading one's unread messages.

A direct message also opens a ``task_type="message"`` task owned by the recipient, in progress, so the
exchange shows on the board and the recipient's runner is told to act on it. Read state is one
``TeamMessageRead`` row per recipient and message: a broadcast read by one member stays unread for the
others. Every write is audited and published on the team's topic after commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.audit.services import record
from apps.realtime import events
from apps.teams import board
from apps.teams.board import BoardActor, BoardError
from apps.teams.models import Task, Team, TeamMember, TeamMessage, TeamMessageRead

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent

TEXT_MAX_BYTES = 10_000
MEDIA_MAX = 20
READ_BATCH = 50
PREVIEW_CHARS = 100
MESSAGE_LOCK = timedelta(minutes=30)


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def _check(text: Any, media: Sequence[Any]) -> tuple[str, list[str]]:
    if not isinstance(text, str) or not text.strip():
        raise BoardError("text is required", code="invalid")
    if len(text.encode()) > TEXT_MAX_BYTES:
        raise BoardError(f"text is longer than {TEXT_MAX_BYTES} bytes", code="invalid")
    if len(media) > MEDIA_MAX or not all(isinstance(m, str) and 0 < len(m) <= 4096 for m in media):
        raise BoardError(f"media: at most {MEDIA_MAX} file paths", code="invalid")
    return text, list(media)


def message_data(message: TeamMessage) -> dict[str, Any]:
    return {
        "id": str(message.pk),
        "team": str(message.team_id),
        "from": message.from_agent.key if message.from_agent else None,
        "to": message.to_agent.key if message.to_agent else None,
        "type": message.message_type,
        "preview": _preview(message.content),
        "task": str(message.task_id) if message.task_id else None,
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def _members(team: Team) -> Any:
    return TeamMember.objects.for_tenant(team.tenant).filter(team_id=team.pk).select_related("agent")


def member_by_key(team: Team, key: str) -> Agent | None:
    membership = _members(team).filter(agent__key=key).first()
    return membership.agent if membership is not None else None


@transaction.atomic
def send(
    team: Team,
    *,
    actor: Actor,
    sender: Agent,
    to: str,
    text: str,
    media: Sequence[str] = (),
    channel: str = "",
    chat_id: str = "",
    user_id: str = "",
) -> TeamMessage:
    """A direct message to a teammate, and the in-progress ``message`` task that carries it to them."""
    text, media = _check(text, media)
    if not isinstance(to, str) or not to.strip():
        raise BoardError("to is required (the agent key of a teammate)", code="invalid")
    recipient = member_by_key(team, to.strip())
    if recipient is None:
        names = ", ".join(m.agent.key for m in _members(team) if m.agent_id != sender.pk)
        raise BoardError(
            f"{to[:64]!r} is not a member of team {team.name}; teammates: {names}", code="invalid"
        )
    if recipient.pk == sender.pk:
        raise BoardError("you cannot send a message to yourself", code="invalid")
    subject = text if len(text) <= 100 else text[:100] + "..."
    task = board.create_task(
        team,
        actor=BoardActor.of_agent(sender),
        subject=" ".join(subject.split())[: board.SUBJECT_MAX] or "message",
        description=text,
        owner=recipient,
        task_type="message",
        user_id=user_id,
        channel=channel,
        chat_id=chat_id,
        metadata={"from": sender.key, "media": media} if media else {"from": sender.key},
    )
    board.assign(team, task.pk, agent=recipient, actor=BoardActor.of_agent(sender))
    Task.objects.for_tenant(team.tenant).filter(pk=task.pk).update(
        lock_expires_at=timezone.now() + MESSAGE_LOCK
    )
    message = TeamMessage.objects.create(
        tenant=team.tenant,
        team=team,
        from_agent=sender,
        to_agent=recipient,
        content=text,
        message_type=TeamMessage.Type.CHAT,
        task=task,
        metadata={"media": media, "channel": channel, "chat_id": chat_id} if media else {},
    )
    data = message_data(message)
    record(actor=actor, verb="team.message.sent", target_type="team", target_id=str(team.pk), data=data)
    events.publish(
        tenant=team.tenant,
        topic=board.topic(team),
        type="message.sent",
        data={
            **data,
            "delivery": {
                "agent": recipient.key,
                "channel": "system",
                "sender": f"teammate:{sender.key}",
                "content": f"[Team message from {sender.key}]: {text}",
                "media": media,
                "origin": {"channel": channel, "chat_id": chat_id, "user_id": user_id},
            },
        },
    )
    return message


@transaction.atomic
def broadcast(
    team: Team, *, actor: Actor, sender: Agent, text: str, media: Sequence[str] = ()
) -> tuple[TeamMessage, list[str]]:
    """A message to every member but the sender (the tool lets only the lead broadcast). Returns the
    message and the recipients' keys."""
    text, media = _check(text, media)
    recipients = [m.agent.key for m in _members(team) if m.agent_id != sender.pk]
    message = TeamMessage.objects.create(
        tenant=team.tenant,
        team=team,
        from_agent=sender,
        to_agent=None,
        content=text,
        message_type=TeamMessage.Type.BROADCAST,
        metadata={"media": media} if media else {},
    )
    data = {**message_data(message), "recipients": recipients}
    record(actor=actor, verb="team.message.broadcast", target_type="team", target_id=str(team.pk), data=data)
    events.publish(
        tenant=team.tenant,
        topic=board.topic(team),
        type="message.broadcast",
        data={
            **data,
            "delivery": {
                "agents": recipients,
                "channel": "system",
                "sender": f"teammate:{sender.key}",
                "content": f"[Team message from {sender.key}]: {text}",
                "media": media,
            },
        },
    )
    return message, recipients


def unread(team: Team, agent: Agent) -> Any:
    """The messages ``agent`` has not read: sent to it, or broadcast by someone else, oldest first."""
    read = TeamMessageRead.objects.for_tenant(team.tenant).filter(
        message_id=OuterRef("pk"), agent_id=agent.pk
    )
    return (
        TeamMessage.objects.for_tenant(team.tenant)
        .filter(team_id=team.pk)
        .filter(Q(to_agent_id=agent.pk) | (Q(to_agent__isnull=True) & ~Q(from_agent_id=agent.pk)))
        .exclude(Exists(read))
        .select_related("from_agent", "to_agent")
        .order_by("created_at", "id")
    )


@dataclass(frozen=True)
class Inbox:
    messages: list[TeamMessage]
    has_more: bool


@transaction.atomic
def read(team: Team, *, actor: Actor, agent: Agent, limit: int = READ_BATCH) -> Inbox:
    """Up to 50 unread messages of ``agent``, marked read for ``agent`` only."""
    if member_by_key(team, agent.key) is None:
        raise BoardError(f"{agent.key} is not a member of team {team.name}", code="forbidden")
    rows = list(unread(team, agent)[: limit + 1])
    messages = rows[:limit]
    if messages:
        TeamMessageRead.objects.bulk_create(
            [TeamMessageRead(tenant=team.tenant, message=m, agent=agent) for m in messages],
            ignore_conflicts=True,
        )
        ids = [str(m.pk) for m in messages]
        record(
            actor=actor,
            verb="team.message.read",
            target_type="team",
            target_id=str(team.pk),
            data={"agent": agent.key, "messages": ids},
        )
        events.publish(
            tenant=team.tenant,
            topic=board.topic(team),
            type="message.read",
            data={"team": str(team.pk), "agent": agent.key, "messages": ids},
        )
    return Inbox(messages=messages, has_more=len(rows) > limit)
