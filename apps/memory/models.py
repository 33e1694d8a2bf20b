"""Memory documents, their indexed chunks, and a tenant's embedding settings.

A document belongs to one agent of one tenant and to one user (``user_id``) or to the agent's global
scope (``user_id == ""``). Its path is what the agent writes: ``MEMORY.md``, ``memory.md`` or
``memory/<…>``. Chunks are what search reads: each has the text, a full-text vector kept by the database
and, when an embedder is configured, an embedding (any model's size: ``embedder`` names the model, and
search only compares vectors of the model the query was embedded with).
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from encrypted_model_fields.fields import EncryptedTextField
from pgvector.django import VectorField

from apps.tenants.scoping import TenantScoped

MAX_DOCUMENT_CHARS = 1_000_000
MAX_PATH_CHARS = 500


class MemoryDocument(TenantScoped):
    class IndexStatus(models.TextChoices):
        PENDING = "pending"
        INDEXED = "indexed"
        FAILED = "failed"
        SKIPPED = "skipped"  # not Markdown: stored, never chunked

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255, blank=True, default="")  # "" = the agent's global scope
    path = models.CharField(max_length=MAX_PATH_CHARS)
    content = models.TextField(blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="")  # sha256 of content
    indexed_hash = models.CharField(max_length=64, blank=True, default="")  # of the content last indexed
    index_status = models.CharField(max_length=10, choices=IndexStatus.choices, default=IndexStatus.PENDING)
    index_error = models.CharField(max_length=500, blank=True, default="")
    indexed_at = models.DateTimeField(null=True, blank=True)
    updated_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "agent", "user_id", "path"], name="memory_document_unique"
            )
        ]
        indexes = [models.Index(fields=["tenant", "agent", "user_id"], name="memory_document_scope")]

    def __str__(self) -> str:
        return self.path


class MemoryChunk(TenantScoped):
    document = models.ForeignKey(MemoryDocument, on_delete=models.CASCADE, related_name="chunks")
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255, blank=True, default="")  # the document's, for filtering
    ordinal = models.PositiveIntegerField()  # position in the document, from 0
    heading = models.CharField(max_length=500, blank=True, default="")  # the Markdown heading it is under
    text = models.TextField()
    # English stemming ("deploying" finds "deployment"); the heading weighs more than the text.
    search_vector = models.GeneratedField(
        expression=SearchVector("heading", weight="A", config="english")
        + SearchVector("text", weight="B", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(null=True, blank=True)
    embedder = models.CharField(max_length=200, blank=True, default="")  # the model that made `embedding`

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "ordinal"], name="memory_chunk_unique")]
        indexes = [
            GinIndex(fields=["search_vector"], name="memory_chunk_search"),
            models.Index(fields=["tenant", "agent", "user_id"], name="memory_chunk_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"


class EmbeddingSettings(TenantScoped):
    """How a tenant's memory is embedded: not at all (full-text search only), with the local model
    shipped with Toolgate, or through an OpenAI-compatible embeddings endpoint."""

    class Kind(models.TextChoices):
        NONE = "none"
        LOCAL = "local"
        OPENAI = "openai"

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.NONE)
    base_url = models.URLField(max_length=500, blank=True, default="")  # openai: e.g. https://api.x.com/v1
    model = models.CharField(max_length=200, blank=True, default="")
    api_key = EncryptedTextField(blank=True, default="")  # write-only; never returned
    dimensions = models.PositiveIntegerField(null=True, blank=True)  # requested size, when the API takes one

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant"], name="embedding_settings_one_per_tenant")]

    def __str__(self) -> str:
        return self.kind
