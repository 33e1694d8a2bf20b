"""Every write to sessions: atomic, published on the tenant's ``sessions`` topic after commit; creating,
changing and deleting a session are audited, and so is a message an API client or a tool adds (a run's
messages are recorded with the run).

``message_append`` takes the session's row lock, so concurrent writers get consecutive ``seq`` numbers.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import record
from apps.realtime import events
from apps.sessions.models import (
    MAX_KEY,
    MAX_LABEL,
    MAX_MESSAGE_CHARS,
    MAX_METADATA_BYTES,
    MAX_USER_ID,
    Session,
    SessionMessage,
)
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent

TOPIC = "sessions"
MAX_TOOL_CALLS = 128
LIVE_CONTENT_CHARS = 2_000  # a live event carries at most this much of a message
LIVE_TOOL_CALLS = 20  # and at most this many of its tool calls, with this much of each one's arguments
LIVE_ARGUMENTS_CHARS = 500


def _invalid(field: str, message: str) -> ServiceError:
    return ServiceError(ErrorCode.INVALID, f"{field}: {message}", details={field: [message]})


def _text(field: str, value: str, limit: int, *, required: bool = False) -> str:
    if not isinstance(value, str):
        raise _invalid(field, "must be a string.")
    if "\x00" in value:
        raise _invalid(field, "must not contain NUL characters.")
    if required and not value.strip():
        raise _invalid(field, "is required.")
    if len(value) > limit:
        raise _invalid(field, f"at most {limit} characters.")
    return value


def check_key(key: str) -> str:
    return _text("key", key, MAX_KEY, required=True)


def _metadata(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid("metadata", "must be a JSON object.")
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
        raise _invalid("metadata", f"at most {MAX_METADATA_BYTES} bytes as JSON.")
    return value


def session_data(session: Session) -> dict[str, Any]:
    return {
        "id": str(session.pk),
        "agent": session.agent.key,
        "key": session.key,
        "user_id": session.user_id,
        "label": session.label,
        "status": session.status,
        "message_count": session.message_count,
    }


def _publish(actor: Actor, verb: str, data: dict[str, Any]) -> None:
    events.publish(tenant=actor.tenant, topic=TOPIC, type=verb, data=data)


@transaction.atomic
def session_open(
    *,
    actor: Actor,
    agent: Agent,
    key: str,
    user_id: str = "",
    channel: str = "",
    chat_id: str = "",
    label: str = "",
    parent: Session | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[Session, bool]:
    """The agent's session under ``key``, created (and audited) when there is none; ``created`` says
    which. An existing session keeps its user, channel and parent: a key names one conversation."""
    check_key(key)
    _text("user_id", user_id, MAX_USER_ID)
    _text("channel", channel, 100)
    _text("chat_id", chat_id, 200)
    _text("label", label, MAX_LABEL)
    tenant = actor.tenant
    found = Session.objects.for_tenant(tenant).filter(agent=agent, key=key).first()
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            session = Session.objects.create(
                tenant=tenant,
                agent=agent,
                key=key,
                user_id=user_id,
                channel=channel,
                chat_id=chat_id,
                label=label,
                parent=parent,
                depth=parent.depth + 1 if parent is not None else 0,
                metadata=_metadata(metadata or {}),
                created_by=actor.label[:300],
            )
    except IntegrityError:  # created meanwhile by a concurrent call
        return Session.objects.for_tenant(tenant).get(agent=agent, key=key), False
    data = session_data(session)
    record(actor=actor, verb="session.created", target_type="session", target_id=str(session.pk), data=data)
    _publish(actor, "session.created", data)
    return session, True


@transaction.atomic
def session_update(
    *, actor: Actor, session: Session, label: str | None = None, status: str | None = None
) -> Session:
    """Rename or archive (and re-activate) a session."""
    changed: list[str] = []
    if label is not None:
        session.label = _text("label", label, MAX_LABEL)
        changed.append("label")
    if status is not None:
        if status not in Session.Status.values:
            raise _invalid("status", f"one of {', '.join(Session.Status.values)}.")
        session.status = status
        changed.append("status")
    if changed:
        session.save(update_fields=[*changed, "updated_at"])
        data = {**session_data(session), "changed": changed}
        record(
            actor=actor, verb="session.updated", target_type="session", target_id=str(session.pk), data=data
        )
        _publish(actor, "session.updated", data)
    return session


@transaction.atomic
def session_delete(*, actor: Actor, session: Session) -> None:
    """Delete a session with its messages (sessions it spawned keep theirs, without a parent)."""
    data = session_data(session)
    target = str(session.pk)
    session.delete()
    record(actor=actor, verb="session.deleted", target_type="session", target_id=target, data=data)
    _publish(actor, "session.deleted", data)


def _live_calls(calls: list[Any]) -> list[dict[str, Any]]:
    """An assistant message's tool calls as its live event carries them: id, name and arguments (cut,
    with their whole size), in OpenAI's shape or the flat one."""
    live = []
    for call in calls[:LIVE_TOOL_CALLS]:
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments", call.get("arguments", ""))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        live.append(
            {
                "id": str(call.get("id", ""))[:200],
                "name": str(function.get("name") or call.get("name") or "")[:200],
                "arguments": arguments[:LIVE_ARGUMENTS_CHARS],
                "arguments_size": len(arguments),
            }
        )
    return live


def _tool_calls(value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_TOOL_CALLS:
        raise _invalid("tool_calls", f"a list of at most {MAX_TOOL_CALLS} calls.")
    for call in value:
        if not isinstance(call, dict):
            raise _invalid("tool_calls", "every call is a JSON object.")
    if len(json.dumps(value, ensure_ascii=False)) > MAX_MESSAGE_CHARS:
        raise _invalid("tool_calls", f"at most {MAX_MESSAGE_CHARS} characters as JSON.")
    return value


@transaction.atomic
def message_append(
    *,
    actor: Actor,
    session: Session,
    role: str,
    content: str,
    source: str,
    name: str = "",
    tool_call_id: str = "",
    tool_calls: list[Any] | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    audit: bool = True,
) -> SessionMessage:
    """Add a message at the end of ``session``'s history. A run records its own messages with
    ``audit=False`` (the run is the record); everything else is audited without the content."""
    if role not in SessionMessage.Role.values:
        raise _invalid("role", f"one of {', '.join(SessionMessage.Role.values)}.")
    _text("content", content, MAX_MESSAGE_CHARS)
    _text("name", name, 200)
    _text("tool_call_id", tool_call_id, 200)
    calls = _tool_calls(tool_calls) if tool_calls else []
    if calls and role != SessionMessage.Role.ASSISTANT:
        raise _invalid("tool_calls", "only an assistant message carries tool calls.")
    if role == SessionMessage.Role.TOOL and not tool_call_id:
        raise _invalid("tool_call_id", "a tool message answers a call: give its id.")
    for field, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000_000:
            raise _invalid(field, "a whole number from 0 to 10000000.")
    locked = Session.objects.for_tenant(actor.tenant).select_for_update().get(pk=session.pk)
    if locked.status == Session.Status.ARCHIVED:
        raise ServiceError(
            ErrorCode.CONFLICT,
            f"session {locked.key!r} is archived; re-activate it to add messages.",
            status=409,
        )
    now = timezone.now()
    message = SessionMessage.objects.create(
        tenant=actor.tenant,
        session=locked,
        seq=locked.message_count + 1,
        role=role,
        content=content,
        name=name,
        tool_call_id=tool_call_id,
        tool_calls=calls,
        source=source[:100],
        sender=actor.label[:300],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )
    locked.message_count = message.seq
    locked.input_tokens += input_tokens
    locked.output_tokens += output_tokens
    locked.last_message_at = now
    locked.save(
        update_fields=["message_count", "input_tokens", "output_tokens", "last_message_at", "updated_at"]
    )
    session.message_count, session.last_message_at = locked.message_count, now
    session.input_tokens, session.output_tokens = locked.input_tokens, locked.output_tokens
    data = {
        "session": str(locked.pk),
        "agent": session.agent.key,
        "key": locked.key,
        "seq": message.seq,
        "role": role,
        "source": message.source,
        "size": len(content),
    }
    if audit:
        record(
            actor=actor,
            verb="session.message_added",
            target_type="session",
            target_id=str(locked.pk),
            data=data,
        )
    live = {
        "content": content[:LIVE_CONTENT_CHARS],
        "name": name,
        "tool_call_id": tool_call_id,
        "tool_calls": _live_calls(calls),
    }
    _publish(actor, "session.message", {**data, **live})
    return message
