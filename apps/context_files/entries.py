"""Context files as the API and the dashboard show them."""

from __future__ import annotations

from typing import Any

from apps.context_files.models import AgentContextFile, UserContextFile
from apps.context_files.routing import Place, describe, route
from apps.context_files.services import size_of
from apps.tenants.models import Agent


def agent_entry(agent: Agent, name: str, row: AgentContextFile | None) -> dict[str, Any]:
    """One file as the API and the dashboard show it."""
    return {
        "name": name,
        "content": row.content if row is not None else None,
        "size": size_of(row.content) if row is not None else None,
        "per_user": route(agent.type, name).read == Place.USER,
        "routing": describe(agent.type, name),
        "updated_at": row.updated_at if row is not None else None,
        "updated_by": row.updated_by if row is not None else None,
    }


def user_entry(row: UserContextFile) -> dict[str, Any]:
    return {
        "name": row.name,
        "content": row.content,
        "size": size_of(row.content),
        "updated_at": row.updated_at,
        "updated_by": row.updated_by,
    }
