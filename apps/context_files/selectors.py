"""Reads of context files, always inside one tenant and one agent."""

from __future__ import annotations

from django.db.models import Count, Max

from apps.context_files.models import NAMES, AgentContextFile, BootstrapCompletion, UserContextFile
from apps.context_files.routing import BOOTSTRAP
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, Tenant


def known_name(name: str) -> str:
    """``name`` when it is one of the context files, else a 404 naming the valid ones."""
    if name not in NAMES:
        raise ServiceError(
            ErrorCode.NOT_FOUND,
            f"{name[:100]!r} is not a context file; the context files are {', '.join(NAMES)}.",
            status=404,
        )
    return name


def agent_files(*, tenant: Tenant, agent: Agent) -> dict[str, AgentContextFile]:
    """The agent's own texts by name (names without one are absent)."""
    rows = AgentContextFile.objects.for_tenant(tenant).filter(agent=agent)
    return {row.name: row for row in rows}


def agent_file(*, tenant: Tenant, agent: Agent, name: str) -> AgentContextFile | None:
    return AgentContextFile.objects.for_tenant(tenant).filter(agent=agent, name=name).first()


def user_files(*, tenant: Tenant, agent: Agent, user_id: str) -> dict[str, UserContextFile]:
    """One user's own copies by name (names without one are absent)."""
    rows = UserContextFile.objects.for_tenant(tenant).filter(agent=agent, user_id=user_id)
    return {row.name: row for row in rows}


def user_file(*, tenant: Tenant, agent: Agent, user_id: str, name: str) -> UserContextFile | None:
    return UserContextFile.objects.for_tenant(tenant).filter(agent=agent, user_id=user_id, name=name).first()


def users_with_copies(*, tenant: Tenant, agent: Agent, limit: int = 100) -> list[dict[str, object]]:
    """The users who have copies of the agent's files (most recently changed first, at most
    ``limit``): ``user_id``, ``files`` (how many) and ``updated_at`` (the latest change)."""
    rows = (
        UserContextFile.objects.for_tenant(tenant)
        .filter(agent=agent)
        .values("user_id")
        .annotate(files=Count("id"), updated_at=Max("updated_at"))
        .order_by("-updated_at", "user_id")[:limit]
    )
    return [dict(row) for row in rows]


def bootstrap_completion(*, tenant: Tenant, agent: Agent, user_id: str) -> BootstrapCompletion | None:
    """The record of ``user_id``'s completed first run with ``agent``, if any."""
    if not user_id:
        return None
    return BootstrapCompletion.objects.for_tenant(tenant).filter(agent=agent, user_id=user_id).first()


def bootstrap_pending(*, tenant: Tenant, agent: Agent, user_id: str) -> bool:
    """Whether a call of ``agent`` for ``user_id`` reads a non-empty BOOTSTRAP.md (its first run is not
    complete): the user's own copy, else the agent's text unless the user completed the first run."""
    if user_id:
        own = user_file(tenant=tenant, agent=agent, user_id=user_id, name=BOOTSTRAP)
        if own is not None:
            return bool(own.content.strip())
        if bootstrap_completion(tenant=tenant, agent=agent, user_id=user_id) is not None:
            return False
    shared = agent_file(tenant=tenant, agent=agent, name=BOOTSTRAP)
    return shared is not None and bool(shared.content.strip())
