"""Writes of memory documents. Each is atomic, audited in its transaction and published on the
``memory`` topic after commit; a written Markdown document is queued for indexing after commit."""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.services import record
from apps.memory import tasks
from apps.memory.chunking import chunk_markdown
from apps.memory.models import MAX_DOCUMENT_CHARS, MemoryChunk, MemoryDocument
from apps.memory.selectors import PathError, clean_path
from apps.realtime import events
from apps.tenants import quotas
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent, Tenant

TOPIC = "memory"
APPEND_SEPARATOR = "\n\n---\n\n"
MAX_USER_ID_CHARS = 255


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", errors="surrogatepass")).hexdigest()


def is_indexed_path(path: str) -> bool:
    """Markdown documents are chunked for search; other memory files are stored only."""
    return path.lower().endswith(".md")


def document_data(document: MemoryDocument, agent: Agent) -> dict[str, Any]:
    """What audit events and live events say about a document (never its content)."""
    return {
        "id": str(document.pk),
        "agent": agent.key,
        "user_id": document.user_id,
        "path": document.path,
        "size": len(document.content.encode("utf-8", errors="surrogatepass")),
        "index_status": document.index_status,
    }


def _check(actor: Actor, agent: Agent, user_id: str, path: str) -> str:
    if agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "agent: an agent of this tenant only.")
    if not isinstance(user_id, str) or len(user_id) > MAX_USER_ID_CHARS:
        raise ServiceError(ErrorCode.INVALID, f"user_id: at most {MAX_USER_ID_CHARS} characters.")
    try:
        return clean_path(path)
    except PathError as error:
        raise ServiceError(ErrorCode.INVALID, str(error)) from None


def _check_chunk_quota(tenant: Tenant, document: MemoryDocument, chunks: int) -> None:
    """Refuse a document whose chunks would take the tenant past its ``memory_chunks`` quota (its own
    current chunks are replaced, so they do not count)."""
    quotas.lock_tenant(tenant)
    others = MemoryChunk.objects.for_tenant(tenant)
    if document.pk is not None and not document._state.adding:
        others = others.exclude(document_id=document.pk)
    quotas.enforce_count(tenant=tenant, name="memory_chunks", used=others.count(), adding=chunks)


def _too_large(size: int) -> ServiceError:
    return ServiceError(
        ErrorCode.INVALID,
        f"content: a memory file holds at most {MAX_DOCUMENT_CHARS} characters; this one would have "
        f"{size}. Keep memory files short: summarise, or split it into several files under memory/.",
    )


@transaction.atomic
def document_write(
    *,
    actor: Actor,
    agent: Agent,
    user_id: str,
    path: str,
    content: str,
    append: bool = False,
    reindex: bool = False,
) -> tuple[MemoryDocument, bool]:
    """Create or replace (``append``: add to, after a ``---`` separator) ``agent``'s document at
    ``path`` for ``user_id`` ("" = the agent's global memory). ``reindex`` indexes it again even when
    its content is what was indexed last. Returns the document and whether it was created."""
    path = _check(actor, agent, user_id, path)
    if len(content) > MAX_DOCUMENT_CHARS:
        raise _too_large(len(content))
    document, created = _locked(actor, agent, user_id, path)
    if append and document.content:
        content = document.content + APPEND_SEPARATOR + content
        if len(content) > MAX_DOCUMENT_CHARS:
            raise _too_large(len(content))
    new_hash = content_hash(content)
    document.content = content
    document.content_hash = new_hash
    document.updated_by = actor.label[:255]
    if reindex:
        document.indexed_hash = ""
    indexed = is_indexed_path(path)
    if not indexed:
        document.index_status = MemoryDocument.IndexStatus.SKIPPED
    elif document.indexed_hash != new_hash or document.index_status != MemoryDocument.IndexStatus.INDEXED:
        document.index_status = MemoryDocument.IndexStatus.PENDING
    if document.index_status == MemoryDocument.IndexStatus.PENDING:
        _check_chunk_quota(actor.tenant, document, len(chunk_markdown(content)))
    document.full_clean(exclude=["tenant", "agent"])
    document.save()
    data = document_data(document, agent)
    verb = "memory.document_created" if created else "memory.document_updated"
    record(actor=actor, verb=verb, target_type="memory_document", target_id=str(document.pk), data=data)
    events.publish(tenant=actor.tenant, topic=TOPIC, type=verb, data=data)
    if indexed and document.index_status == MemoryDocument.IndexStatus.PENDING:
        tasks.schedule_index(document)
    return document, created


def _locked(actor: Actor, agent: Agent, user_id: str, path: str) -> tuple[MemoryDocument, bool]:
    """The document row, locked for this transaction (created when missing; a concurrent creation is
    waited for and then locked)."""
    rows = MemoryDocument.objects.for_tenant(actor.tenant).filter(
        agent_id=agent.pk, user_id=user_id, path=path
    )
    document = rows.select_for_update().first()
    if document is not None:
        return document, False
    try:
        with transaction.atomic():
            return MemoryDocument.objects.create(
                tenant=actor.tenant, agent=agent, user_id=user_id, path=path
            ), True
    except IntegrityError:
        return rows.select_for_update().get(), False


@transaction.atomic
def document_delete(*, actor: Actor, agent: Agent, document: MemoryDocument) -> None:
    """Delete the document and its chunks."""
    if document.tenant_id != actor.tenant.pk or document.agent_id != agent.pk:
        raise ServiceError(ErrorCode.INVALID, "document: a document of this agent only.")
    data = document_data(document, agent)
    MemoryDocument.objects.for_tenant(actor.tenant).filter(pk=document.pk).delete()
    record(
        actor=actor,
        verb="memory.document_deleted",
        target_type="memory_document",
        target_id=data["id"],
        data=data,
    )
    events.publish(tenant=actor.tenant, topic=TOPIC, type="memory.document_deleted", data=data)
