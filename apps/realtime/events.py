"""Live events: published after commit to tenant-scoped channel-layer groups.

An event is ``{"id", "type", "tenant", "topic", "data", "ts"}``. The group name carries the tenant id,
so a subscriber can only ever join groups of its own tenant; the consumer checks the tenant once more
before sending (fail closed).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import DatabaseError, transaction
from django.utils import timezone

from apps.tenants.roles import Role

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

logger = logging.getLogger(__name__)

ME = "me"

# Topic -> the least role that may subscribe to it. Later features add their topics here.
TOPICS: dict[str, str] = {
    "audit": Role.ADMIN,
    "agents": Role.VIEWER,
    "api_keys": Role.ADMIN,
    "members": Role.VIEWER,
    "tool_calls": Role.MEMBER,
    "policy": Role.VIEWER,
    "approvals": Role.ADMIN,
    "mcp": Role.ADMIN,
    "secure_cli": Role.ADMIN,
    "custom_tools": Role.ADMIN,
    "sandbox": Role.ADMIN,
    "context_files": Role.ADMIN,
    "memory": Role.ADMIN,
    "knowledge": Role.ADMIN,
    "skills": Role.ADMIN,
    "llm": Role.ADMIN,
    "sessions": Role.MEMBER,
    "messaging": Role.ADMIN,
    "runs": Role.MEMBER,
    # The subscriber's own events (e.g. the decision on an access request it made): every role, and
    # only ever its own actor's (``actor_group``), never the tenant's.
    ME: Role.VIEWER,
}


# Topics with a parameter, "<prefix>:<id>" (the id a canonical UUID) -> the least role. "team:<team id>"
# carries one team's board: its tasks, comments, escalations and messages.
TOPIC_PATTERNS: dict[str, str] = {"team": Role.VIEWER}


def topic_role(topic: str) -> str | None:
    """The least role that may subscribe to ``topic``, or None for an unknown topic."""
    role = TOPICS.get(topic)
    if role is not None:
        return role
    prefix, sep, ident = topic.partition(":")
    if not sep or prefix not in TOPIC_PATTERNS:
        return None
    try:
        canonical = str(uuid.UUID(ident))
    except ValueError:
        return None
    # One spelling per topic: events carry the canonical one, and a socket matches topics exactly.
    return TOPIC_PATTERNS[prefix] if canonical == ident else None


def group_name(tenant_id: uuid.UUID | str, topic: str) -> str:
    """The channel-layer group of a tenant's topic (group names allow no ":")."""
    prefix, sep, ident = topic.partition(":")
    suffix = f"{prefix}.{uuid.UUID(ident).hex}" if sep else topic
    return f"tg.{uuid.UUID(str(tenant_id)).hex}.{suffix}"


def actor_group(tenant_id: uuid.UUID | str, kind: str, actor_id: str) -> str:
    """The channel-layer group of one actor's ``me`` topic in one tenant (an API key, a user, the
    system), hashed like :func:`principal_group` so that no identifier appears in clear text."""
    tenant_hex = uuid.UUID(str(tenant_id)).hex
    digest = hashlib.sha256(f"{tenant_hex}:{kind}:{actor_id}".encode()).hexdigest()[:48]
    return f"tg.actor.{digest}"


def build(*, tenant: Tenant, topic: str, type: str, data: dict[str, Any]) -> dict[str, Any]:
    if topic_role(topic) is None:
        raise ValueError(f"unknown event topic {topic!r}")
    return {
        "id": uuid.uuid4().hex,
        "type": type,
        "tenant": tenant.slug,
        "topic": topic,
        "data": data,
        "ts": timezone.now().isoformat(),
        "_tenant_id": str(tenant.pk),
    }


def _group_send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a lost live message must never break the committed change it reports
        logger.exception("could not deliver live message %s to %s", message["type"], group)


def deliver_after_commit(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` once the current transaction commits, and never if it rolls back.

    On the PostgreSQL layer the message is written inside the transaction itself (its NOTIFY fires on
    commit); other layers (Redis) get it from an on-commit hook."""
    layer = get_channel_layer()
    # Looked up on the class: channels_redis' layer proxies attribute reads to a per-event-loop object
    # and raises outside a running loop.
    if layer is None or not hasattr(type(layer), "group_send_in_transaction"):
        transaction.on_commit(lambda: _group_send(group, message))
        return
    try:
        if transaction.get_connection().in_atomic_block:
            with transaction.atomic():  # a savepoint: a failed write must not abort the caller's transaction
                layer.group_send_in_transaction(group, message)
        else:  # autocommit: one statement, nothing to protect, no BEGIN/COMMIT round trips
            layer.group_send_in_transaction(group, message)
    except Exception:  # a lost live message must never break the change it reports
        logger.exception("could not queue live message %s for %s", message["type"], group)


def publish(*, tenant: Tenant, topic: str, type: str, data: dict[str, Any]) -> None:
    """Queue a live event for delivery once the current transaction commits (at once outside one)."""
    if topic == ME:
        raise ValueError("events for one actor go through publish_to_actor")
    event = build(tenant=tenant, topic=topic, type=type, data=data)
    deliver_after_commit(group_name(tenant.pk, topic), {"type": "toolgate.event", "event": event})


def _statement_layer() -> Any:
    """The channel layer when it can store a message as part of another statement (PostgreSQL)."""
    layer = get_channel_layer()
    return layer if layer is not None and hasattr(type(layer), "group_send_statement") else None


def write_and_publish(
    statement: str, params: Sequence[Any], *, tenant: Tenant, topic: str, type: str, data: dict[str, Any]
) -> None:
    """Run ``statement`` (one SQL ``INSERT`` that returns nothing) and publish a live event, as
    :func:`publish` would after it, in one round trip to the database where that is possible.

    On the PostgreSQL layer in autocommit, the write and the event's message are one statement (the
    write as a data-modifying ``WITH``): both land, or neither. Should the event's part fail, the write
    runs again alone and the event is lost (logged): a record must never depend on its live event.
    Inside a transaction, or on another layer, it is the write, then :func:`publish`. Errors of the write
    itself are raised as they would be without the event."""
    if topic == ME:
        raise ValueError("events for one actor go through publish_to_actor")
    event = build(tenant=tenant, topic=topic, type=type, data=data)
    group, message = group_name(tenant.pk, topic), {"type": "toolgate.event", "event": event}
    layer = _statement_layer()
    conn = transaction.get_connection()
    if layer is None or conn.in_atomic_block:
        with conn.cursor() as cursor:
            cursor.execute(statement, params)
        deliver_after_commit(group, message)
        return
    try:
        send, send_params = layer.group_send_statement(group, message)
    except Exception:  # a message that cannot be stored (serialized) must not cost the record
        logger.exception("could not queue live message %s for %s", message["type"], group)
        with conn.cursor() as cursor:
            cursor.execute(statement, params)
        return
    try:
        with _bound_cursor(conn) as cursor:
            cursor.execute(f"WITH written AS ({statement}) {send}", [*params, *send_params])
    except DatabaseError:
        logger.exception("could not store live message %s for %s with its record", message["type"], group)
        with conn.cursor() as cursor:  # autocommit: the failed statement left nothing to undo
            cursor.execute(statement, params)


def _bound_cursor(conn: Any) -> Any:
    """A cursor of Django's connection ``conn`` (its error mapping, query log and execute wrappers) that
    binds its parameters on the server (Django's ``ServerBindingCursor``; its default cursors bind them
    client-side, quoting each into the statement's text in Python). For the one statement every tool
    call runs: its parameters (about thirty) are sent apart from its text, as they are. It is not
    prepared: Django keeps psycopg's preparing off, and a prepared statement leaves no text in Django's
    query log.

    Only where the connection's cursors are Django's plain client-side ones: cursors of another class
    (tracing's, which record the statement as a span, or server-side ones already) are kept."""
    from django.db.backends.postgresql.base import Cursor, ServerBindingCursor

    conn.close_if_health_check_failed()
    conn.ensure_connection()
    if conn.connection.cursor_factory is not Cursor:
        return conn.cursor()
    with conn.wrap_database_errors:
        return conn._prepare_cursor(ServerBindingCursor(conn.connection))  # type: ignore[call-arg]


def publish_to_actor(*, tenant: Tenant, kind: str, actor_id: str, type: str, data: dict[str, Any]) -> None:
    """Queue a live event on topic ``me`` for one actor of ``tenant`` (``kind`` and ``actor_id`` as
    :class:`apps.tenants.actors.Actor` has them): only that actor's sockets subscribed to ``me`` get
    it, once the current transaction commits (at once outside one)."""
    if not kind or not actor_id:
        return
    event = build(tenant=tenant, topic=ME, type=type, data=data)
    event["_actor"] = f"{kind}:{actor_id}"
    deliver_after_commit(actor_group(tenant.pk, kind, actor_id), {"type": "toolgate.event", "event": event})


# --- closing the sockets of a revoked credential -----------------------------------------------------

PrincipalKind = Literal["api_key", "member", "session", "tenant"]


def principal_group(kind: PrincipalKind, ident: str) -> str:
    """The group every socket of one credential joins: an API key (its id), a user's membership of a
    tenant (``<tenant id>:<user id>``), a dashboard session (its key, hashed: never in clear text), or
    the whole tenant (its id: every socket of a tenant that is suspended)."""
    digest = hashlib.sha256(f"{kind}:{ident}".encode()).hexdigest()[:48]
    return f"tg.principal.{digest}"


def disconnect(*, kind: PrincipalKind, ident: str, reason: str, code: str = "credentials_revoked") -> None:
    """Close every live socket of a credential once the current transaction commits.

    Used when a key is revoked or expires, a member is removed or changes role, and on logout: a socket
    must not go on receiving events on credentials that no longer hold."""
    message = {"type": "toolgate.disconnect", "reason": reason, "code": code}
    deliver_after_commit(principal_group(kind, ident), message)


def public(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if not k.startswith("_")}
