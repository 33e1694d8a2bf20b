"""The sessions tools: sessions_list, sessions_history, sessions_send and session_status.

A call sees the sessions of its own agent for its own user (``selectors.visible_to_call``); another
user's conversation, another agent's or another tenant's is "not found", the same as one that does not
exist. Answers are bounded: a message shows at most ``MESSAGE_CHARS`` characters, a history at most
``HISTORY_CHARS``.
"""

from __future__ import annotations

from typing import Any

from apps.sessions import selectors, services
from apps.sessions.models import Session, SessionMessage
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult

DEFAULT_SESSIONS = 20
MAX_SESSIONS = 100
DEFAULT_HISTORY = 30
MAX_HISTORY = 200
MESSAGE_CHARS = 4_000
HISTORY_CHARS = 100_000
MAX_SEND_CHARS = 20_000


def _limit(args: dict[str, Any], default: int, most: int) -> int | ToolResult:
    value = args.get("limit", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        return ToolResult.error(f"limit must be a whole number from 1 to {most}.")
    return value


def _whose(ctx: CallContext) -> str:
    return f"user {ctx.user_id}" if ctx.user_id else "calls without a user id"


def _find(ctx: CallContext, key: Any) -> Session | ToolResult:
    if not isinstance(key, str) or not key.strip():
        return ToolResult.error(
            "session_key is required: the key of one of your sessions (see sessions_list)."
        )
    session = (
        selectors.visible_to_call(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id)
        .filter(key=key)
        .first()
    )
    if session is None:
        return ToolResult.error(
            f"no session {key[:200]!r} of this agent for {_whose(ctx)}; sessions_list shows the ones you "
            "can use."
        )
    return session


def _when(session: Session) -> str:
    moment = session.last_message_at or session.created_at
    return moment.strftime("%Y-%m-%d %H:%M UTC")


@tool("sessions_list")
def sessions_list(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """This agent's sessions for the call's user, most recently active first."""
    limit = _limit(args, DEFAULT_SESSIONS, MAX_SESSIONS)
    if isinstance(limit, ToolResult):
        return limit
    visible = selectors.visible_to_call(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id)
    total = visible.count()
    sessions = list(visible[:limit])
    if not sessions:
        return ToolResult.ok(f"No sessions of agent {ctx.agent.key} for {_whose(ctx)}.", sessions=[], total=0)
    lines = [f"{total} session{'s' if total != 1 else ''} of agent {ctx.agent.key} for {_whose(ctx)}"]
    if total > len(sessions):
        lines[0] += f" (the {len(sessions)} most recently active)"
    lines[0] += ":"
    rows = []
    for session in sessions:
        current = " (this session)" if session.key == ctx.session_key else ""
        label = f" “{session.label}”" if session.label else ""
        lines.append(
            f"- {session.key}{label}: {session.status}, {session.message_count} messages, "
            f"last active {_when(session)}{current}"
        )
        rows.append(
            {
                "key": session.key,
                "label": session.label,
                "status": session.status,
                "message_count": session.message_count,
                "last_message_at": session.last_message_at.isoformat() if session.last_message_at else None,
            }
        )
    return ToolResult.ok("\n".join(lines), sessions=rows, total=total)


def _render(message: SessionMessage) -> str:
    head = f"#{message.seq} {message.role}"
    if message.role == SessionMessage.Role.TOOL:
        head += f" result of {message.name or 'a tool'}"
    elif message.name:
        head += f" ({message.name})"
    text = message.content
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + f" … [{len(message.content) - MESSAGE_CHARS} more characters]"
    if message.tool_calls:
        names = [
            str(call.get("function", {}).get("name") or call.get("name") or "?")
            for call in message.tool_calls
        ]
        text = (text + "\n" if text else "") + f"[calls: {', '.join(names)}]"
    return f"{head}: {text}"


@tool("sessions_history")
def sessions_history(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The last messages of one of this agent's sessions for the call's user."""
    session = _find(ctx, args.get("session_key"))
    if isinstance(session, ToolResult):
        return session
    limit = _limit(args, DEFAULT_HISTORY, MAX_HISTORY)
    if isinstance(limit, ToolResult):
        return limit
    rows = selectors.last_messages(session=session, limit=limit)
    if not rows:
        return ToolResult.ok(f"Session {session.key} has no messages yet.", key=session.key, messages=0)
    rendered = [_render(message) for message in rows]
    while len(rendered) > 1 and sum(len(line) + 2 for line in rendered) > HISTORY_CHARS:
        rendered.pop(0)
    shown = len(rendered)
    header = f"Session {session.key}: messages {rows[-shown].seq}-{rows[-1].seq} of {session.message_count}"
    return ToolResult.ok(
        header + "\n\n" + "\n\n".join(rendered), key=session.key, messages=shown, total=session.message_count
    )


@tool("sessions_send")
def sessions_send(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Add a user message to another of this agent's sessions for the call's user."""
    session = _find(ctx, args.get("session_key"))
    if isinstance(session, ToolResult):
        return session
    text = args.get("message")
    if not isinstance(text, str) or not text.strip():
        return ToolResult.error("message is required: the text to send.")
    if len(text) > MAX_SEND_CHARS:
        return ToolResult.error(f"message is longer than {MAX_SEND_CHARS} characters; shorten it.")
    if session.key == ctx.session_key:
        return ToolResult.error("that is this session: answer in your reply instead of sending to yourself.")
    try:
        message = services.message_append(
            actor=ctx.actor,
            session=session,
            role=SessionMessage.Role.USER,
            content=text,
            name=ctx.agent.key,
            source="tool:sessions_send",
        )
    except ServiceError as error:
        return ToolResult.error(f"sessions_send: {error.message}")
    return ToolResult.ok(
        f"Sent to session {session.key} as message #{message.seq}; it is read there on the next turn.",
        key=session.key,
        seq=message.seq,
    )


@tool("session_status")
def session_status(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The current session: its key, user, size, tokens and times."""
    if not ctx.session_key:
        return ToolResult.error("this call has no session key, so there is no current session to describe.")
    session = selectors.session_by_key(tenant=ctx.tenant, agent=ctx.agent, key=ctx.session_key)
    if session is None:
        return ToolResult.ok(
            f"Session {ctx.session_key[:200]} of agent {ctx.agent.key} has no recorded history yet "
            f"(user: {ctx.user_id or 'none'}).",
            key=ctx.session_key,
            recorded=False,
        )
    lines = [
        f"Session {session.key} of agent {ctx.agent.key}",
        f"- user: {session.user_id or 'none'}",
        f"- status: {session.status}",
        f"- messages: {session.message_count}",
        f"- tokens: {session.input_tokens} in, {session.output_tokens} out",
        f"- started: {session.created_at.strftime('%Y-%m-%d %H:%M UTC')}",
        f"- last active: {_when(session)}",
    ]
    if session.label:
        lines.insert(1, f"- label: {session.label}")
    if session.parent is not None:
        lines.append(f"- spawned by session {session.parent.key} (depth {session.depth})")
    return ToolResult.ok(
        "\n".join(lines),
        key=session.key,
        recorded=True,
        status=session.status,
        message_count=session.message_count,
        input_tokens=session.input_tokens,
        output_tokens=session.output_tokens,
        depth=session.depth,
    )
