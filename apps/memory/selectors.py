"""Reads of memory documents: which paths are memory, whose memory a call reads (SPEC B §8
MemoryInterceptor), and the documents of an agent (with their chunk counts) for the API and the
dashboard.

A call reads its user's document first, then the agent's global one (``user_id == ""``). An agent that
works in a team as a member (not the lead) then falls back to the lead's memory, user then global.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from django.db.models import F, Func, IntegerField, Q, QuerySet

from apps.memory.models import MAX_PATH_CHARS, MemoryChunk, MemoryDocument
from apps.teams.models import Team, TeamMember
from apps.tenants.models import Agent, Tenant

ROOT_FILES = ("MEMORY.md", "memory.md")
FOLDER = "memory/"


class PathError(ValueError):
    """A path that is not a memory path; the message says which paths are."""


def is_memory_path(path: str) -> bool:
    """``MEMORY.md``, ``memory.md`` or ``memory/<name>`` (already normalised, workspace-relative)."""
    return path in ROOT_FILES or (path.startswith(FOLDER) and len(path) > len(FOLDER))


def clean_path(path: str) -> str:
    """``path`` normalised (``./memory//a.md`` is ``memory/a.md``), or :class:`PathError`."""
    if not isinstance(path, str) or not path.strip():
        raise PathError("path: give a memory path such as MEMORY.md or memory/notes.md.")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"path: at most {MAX_PATH_CHARS} characters.")
    if any(ord(char) < 32 or ord(char) == 127 for char in path) or "\\" in path:
        raise PathError("path: control characters and backslashes are not allowed.")
    if path.startswith("/") or any(part == ".." for part in path.split("/")):
        raise PathError("path: a path relative to the workspace, without '..'.")
    normal = posixpath.normpath(path)
    if not is_memory_path(normal):
        raise PathError(
            f"path: {path!r} is not a memory path; memory paths are MEMORY.md, memory.md and memory/<name>."
        )
    return normal


@dataclass(frozen=True)
class Scope:
    """One place a document may be read from: an agent's memory for one user ("" = global)."""

    agent: Agent
    user_id: str
    lead: bool  # the team lead's memory, not the agent's own


def team_lead_of(*, tenant: Tenant, agent: Agent) -> Agent | None:
    """The lead of the oldest active team ``agent`` is a member of, when it is a member and not a lead;
    None for an agent that leads a team or is in none (its memory is its own)."""
    if Team.objects.for_tenant(tenant).filter(lead_id=agent.pk, status=Team.Status.ACTIVE).exists():
        return None
    membership = (
        TeamMember.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, team__status=Team.Status.ACTIVE)
        .exclude(team__lead_id=agent.pk)
        .select_related("team__lead")
        .order_by("team__created_at", "team_id")
        .first()
    )
    return membership.team.lead if membership is not None else None


def read_scopes(*, tenant: Tenant, agent: Agent, user_id: str, lead: Agent | None) -> list[Scope]:
    """Where a call of ``agent`` for ``user_id`` reads memory, first match wins."""
    scopes = [Scope(agent, user_id, False)]
    if user_id:
        scopes.append(Scope(agent, "", False))
    if lead is not None:
        scopes.append(Scope(lead, user_id, True))
        if user_id:
            scopes.append(Scope(lead, "", True))
    return scopes


def _in_scopes(tenant: Tenant, scopes: list[Scope]) -> QuerySet[MemoryDocument]:
    condition = Q()
    for scope in scopes:
        condition |= Q(agent_id=scope.agent.pk, user_id=scope.user_id)
    return MemoryDocument.objects.for_tenant(tenant).filter(condition)


def _rank(document: MemoryDocument, scopes: list[Scope]) -> int:
    for index, scope in enumerate(scopes):
        if document.agent_id == scope.agent.pk and document.user_id == scope.user_id:
            return index
    return len(scopes)


def document_for_read(
    *, tenant: Tenant, scopes: list[Scope], path: str
) -> tuple[MemoryDocument, Scope] | None:
    """The document at ``path`` from the first scope that has one."""
    found = list(_in_scopes(tenant, scopes).filter(path=path))
    if not found:
        return None
    best = min(found, key=lambda document: _rank(document, scopes))
    return best, scopes[_rank(best, scopes)]


@dataclass(frozen=True)
class Visible:
    path: str
    size: int  # bytes of UTF-8
    scope: Scope


def visible_documents(*, tenant: Tenant, scopes: list[Scope]) -> list[Visible]:
    """Every path a call can read, each from the scope a read would take it from, sorted by path."""
    rows = (
        _in_scopes(tenant, scopes)
        .annotate(size=Func(F("content"), function="octet_length", output_field=IntegerField()))
        .only("id", "agent_id", "user_id", "path")
    )
    best: dict[str, tuple[int, Visible]] = {}
    for row in rows:
        rank = _rank(row, scopes)
        if rank < len(scopes) and (row.path not in best or rank < best[row.path][0]):
            best[row.path] = (rank, Visible(row.path, int(row.size), scopes[rank]))  # type: ignore[attr-defined]
    return [best[path][1] for path in sorted(best)]


def document_list(
    *, tenant: Tenant, agent: Agent, user_id: str | None = None, path_prefix: str = ""
) -> QuerySet[MemoryDocument]:
    """An agent's documents (every user's and the global ones), with their size, without content."""
    queryset = MemoryDocument.objects.for_tenant(tenant).filter(agent_id=agent.pk)
    if user_id is not None:
        queryset = queryset.filter(user_id=user_id)
    if path_prefix:
        queryset = queryset.filter(path__startswith=path_prefix)
    return queryset.annotate(
        size=Func(F("content"), function="octet_length", output_field=IntegerField())
    ).defer("content")


def document_get(*, tenant: Tenant, agent: Agent, user_id: str, path: str) -> MemoryDocument | None:
    return (
        MemoryDocument.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, user_id=user_id, path=path)
        .first()
    )


def documents_by_id(*, tenant: Tenant, ids: list[str]) -> dict[str, MemoryDocument]:
    """The tenant's documents among ``ids`` (with their agent), keyed by the string of their id; ids of
    another tenant's documents are left out."""
    return {
        str(document.pk): document
        for document in MemoryDocument.objects.for_tenant(tenant).select_related("agent").filter(pk__in=ids)
    }


def chunk_count(*, tenant: Tenant, document: MemoryDocument) -> int:
    """How many indexed chunks ``document`` has."""
    return MemoryChunk.objects.for_tenant(tenant).filter(document_id=document.pk).count()
