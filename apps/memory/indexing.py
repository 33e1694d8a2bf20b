"""Indexing a memory document for search: its Markdown chunks (:mod:`apps.memory.chunking`), each with
the full-text vector the database keeps and, when the tenant has an embedder, an embedding.

The document's chunks are replaced in one transaction, and only if the document still has the content
that was chunked (a later write queues its own job). Indexing is idempotent by content hash: a document
already indexed with its current content is left alone. An embedder that fails marks the document
``failed`` with its message; its full-text chunks are stored all the same, so search still finds it.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from apps.memory import embeddings
from apps.memory.chunking import Chunk, chunk_markdown
from apps.memory.models import MemoryChunk, MemoryDocument
from apps.memory.services import TOPIC, content_hash, document_data, is_indexed_path
from apps.realtime import events
from apps.tenants import quotas
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent, Tenant

logger = logging.getLogger(__name__)

EMBED_BATCH = 64  # texts per embedder request
MAX_ERROR_CHARS = 500  # MemoryDocument.index_error's size


def index_document(*, tenant: Tenant, document_id: str) -> str:
    """Index one document of ``tenant``: "indexed", "failed" (embedder error; full text stored),
    "unchanged" (already indexed, or not Markdown) or "gone" (deleted, or changed meanwhile)."""
    document = MemoryDocument.objects.for_tenant(tenant).filter(pk=document_id).first()
    if document is None:
        return "gone"
    if not is_indexed_path(document.path):
        return "unchanged"
    indexed_hash = content_hash(document.content)
    if document.indexed_hash == indexed_hash and document.index_status == MemoryDocument.IndexStatus.INDEXED:
        return "unchanged"
    chunks = chunk_markdown(document.content)
    vectors, embedder_name, error = _embed(tenant, chunks)
    with transaction.atomic():
        locked = MemoryDocument.objects.for_tenant(tenant).select_for_update().filter(pk=document_id).first()
        if locked is None or content_hash(locked.content) != indexed_hash:
            return "gone"
        quotas.lock_tenant(tenant)
        others = MemoryChunk.objects.for_tenant(tenant).exclude(document_id=locked.pk).count()
        try:
            quotas.enforce_count(tenant=tenant, name="memory_chunks", used=others, adding=len(chunks))
        except ServiceError as refused:  # another document took the room since this one was written
            chunks, vectors, error = [], None, refused.message
        MemoryChunk.objects.for_tenant(tenant).filter(document_id=locked.pk).delete()
        MemoryChunk.objects.bulk_create(
            [
                MemoryChunk(
                    tenant=tenant,
                    document=locked,
                    agent_id=locked.agent_id,
                    user_id=locked.user_id,
                    ordinal=ordinal,
                    heading=chunk.heading,
                    text=chunk.text,
                    embedding=vectors[ordinal] if vectors is not None else None,
                    embedder=embedder_name if vectors is not None else "",
                )
                for ordinal, chunk in enumerate(chunks)
            ]
        )
        locked.indexed_hash = indexed_hash
        locked.index_status = (
            MemoryDocument.IndexStatus.FAILED if error else MemoryDocument.IndexStatus.INDEXED
        )
        locked.index_error = error[:MAX_ERROR_CHARS]
        locked.indexed_at = timezone.now()
        locked.save(update_fields=["indexed_hash", "index_status", "index_error", "indexed_at", "updated_at"])
        agent = Agent.objects.for_tenant(tenant).get(pk=locked.agent_id)
        data = {**document_data(locked, agent), "chunks": len(chunks), "error": locked.index_error}
        events.publish(tenant=tenant, topic=TOPIC, type="memory.document_indexed", data=data)
    return "failed" if error else "indexed"


def _embed(tenant: Tenant, chunks: list[Chunk]) -> tuple[list[list[float]] | None, str, str]:
    """The chunks' embeddings with the embedder's name, or (None, "", "") without an embedder, or
    (None, "", message) when it failed."""
    try:
        embedder = embeddings.for_tenant(tenant)
        if embedder is None or not chunks:
            return None, "", ""
        vectors: list[list[float]] = []
        texts = [f"{chunk.heading}\n\n{chunk.text}" if chunk.heading else chunk.text for chunk in chunks]
        for start in range(0, len(texts), EMBED_BATCH):
            batch = texts[start : start + EMBED_BATCH]
            answer = embedder.embed(batch)
            if len(answer) != len(batch):
                raise embeddings.EmbedderError(
                    f"the embedder returned {len(answer)} vectors for {len(batch)} texts"
                )
            vectors.extend(answer)
    except embeddings.EmbedderError as error:
        logger.warning("memory indexing of tenant %s: embedder failed: %s", tenant.pk, error)
        return None, "", f"embedding failed: {error}"
    return vectors, embedder.name[:200], ""
