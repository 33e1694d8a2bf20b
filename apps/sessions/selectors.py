"""Reads of sessions, always inside one tenant."""

from __future__ import annotations

import uuid

from django.db.models import F, Q, QuerySet

from apps.sessions.models import Session, SessionMessage
from apps.tenants.models import Agent, Tenant


def session_list(
    *,
    tenant: Tenant,
    agent: Agent | None = None,
    user_id: str | None = None,
    status: str | None = None,
    query: str = "",
) -> QuerySet[Session]:
    """The tenant's sessions, most recently active first; narrowed by agent, user, status and words in
    the key or label."""
    sessions = Session.objects.for_tenant(tenant).select_related("agent")
    if agent is not None:
        sessions = sessions.filter(agent=agent)
    if user_id is not None:
        sessions = sessions.filter(user_id=user_id)
    if status:
        sessions = sessions.filter(status=status)
    if query:
        sessions = sessions.filter(Q(key__icontains=query) | Q(label__icontains=query))
    return sessions.order_by(F("last_message_at").desc(nulls_last=True), "-created_at", "id")


def visible_to_call(*, tenant: Tenant, agent: Agent, user_id: str) -> QuerySet[Session]:
    """The sessions a tool call may see: the same agent's, for the same user (a call without a user id
    sees the sessions without one)."""
    return session_list(tenant=tenant, agent=agent, user_id=user_id)


def history(*, tenant: Tenant, session: Session) -> QuerySet[SessionMessage]:
    """Every message of ``session``, in order (a page reads them a slice at a time)."""
    return SessionMessage.objects.for_tenant(tenant).filter(session=session).order_by("seq")


def source_messages(*, tenant: Tenant, session_id: uuid.UUID, source: str) -> QuerySet[SessionMessage]:
    """The messages one source wrote into a session (``run:<id>``: a run's transcript), in order."""
    return (
        SessionMessage.objects.for_tenant(tenant).filter(session_id=session_id, source=source).order_by("seq")
    )


def children(*, tenant: Tenant, session: Session) -> QuerySet[Session]:
    """The sessions whose parent is ``session`` (its subagents'), with their agent, unordered."""
    return Session.objects.for_tenant(tenant).select_related("agent").filter(parent=session)


def session_by_key(*, tenant: Tenant, agent: Agent, key: str) -> Session | None:
    """The agent's session with this key (its parent loaded), or None."""
    return Session.objects.for_tenant(tenant).select_related("parent").filter(agent=agent, key=key).first()


def messages(*, session: Session, after: int = 0, limit: int | None = None) -> list[SessionMessage]:
    """``session``'s messages after ``seq`` ``after``, in order; with ``limit``, the first ``limit``."""
    rows = (
        SessionMessage.objects.for_tenant(session.tenant)
        .filter(session=session, seq__gt=after)
        .order_by("seq")
    )
    return list(rows[:limit] if limit is not None else rows)


def last_messages(*, session: Session, limit: int) -> list[SessionMessage]:
    """The last ``limit`` messages of ``session``, in order."""
    rows = SessionMessage.objects.for_tenant(session.tenant).filter(session=session).order_by("-seq")[:limit]
    return list(reversed(rows))
