"""Embedders: text to vectors for memory search.

:func:`for_tenant` gives the tenant's embedder (:class:`~apps.memory.models.EmbeddingSettings`), or
None when it has none: search then runs on full text alone and says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from apps.tenants.models import Tenant


class EmbedderError(Exception):
    """The embedder could not embed (unreachable endpoint, bad answer, missing model); the message says
    what to fix, without secrets."""


class Embedder(Protocol):
    name: str  # the model, as stored in MemoryChunk.embedder (vectors of different models never mix)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; raises EmbedderError."""


def for_tenant(tenant: Tenant) -> Embedder | None:
    """The tenant's embedder, or None (no embedder configured)."""
    from apps.memory.models import EmbeddingSettings

    settings = EmbeddingSettings.objects.for_tenant(tenant).first()
    if settings is None or settings.kind == EmbeddingSettings.Kind.NONE:
        return None
    raise EmbedderError(f"the {settings.kind} embedder is not available in this deployment")
