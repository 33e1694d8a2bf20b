"""Hybrid search over an agent's memory chunks: full text merged with vector similarity.

How a query is scored (:func:`hybrid_search`):

- **Full text**: ``websearch_to_tsquery('english', query)`` (quoted phrases, ``or``, ``-word``; English
  stemming) against the chunk's stored ``search_vector`` (heading weighted A, text B), ranked with
  ``ts_rank_cd`` (cover density: terms close together rank higher). Ranks are divided by the best rank
  of the query, so the top full-text hit scores 1.
- **Vector**: the query is embedded with the tenant's embedder and compared by cosine similarity with
  the chunks embedded by the same model (``MemoryChunk.embedder``); vectors of another model are never
  compared. Similarity is clipped to [0, 1]. The shipped model's vectors have an HNSW index (memory
  migration 0003), searched with pgvector's iterative scan so that the tenant, agent and scope filters
  still yield enough candidates; other models' vectors are compared by an exact scan.
- **Merge**: ``score = 0.3 * text + 0.7 * vector``. Meaning carries most of the weight, because memory
  is recalled by paraphrase ("how do we ship" for a note on deployments); the text part keeps exact
  names, numbers and rare words on top. Each side contributes its best ``CANDIDATES_PER_SIDE`` chunks;
  a chunk found by both adds both parts. One hit per chunk.

Without an embedder (or when it fails at query time) the search runs on full text alone, with the text
rank as the score, and the result says so: ``mode`` is ``"fts"`` instead of ``"hybrid"``.

Every query is filtered by tenant and agent, and by scope: ``user`` (that user's documents), ``global``
(the agent's shared documents, ``user_id == ""``) or ``all`` (both, where the user's document shadows a
global one at the same path, as it does for memory_get and read_file: a hit always names the document
those tools open).
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from apps.memory import embeddings, selectors
from apps.memory.models import MemoryChunk, MemoryDocument

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

logger = logging.getLogger(__name__)

TEXT_WEIGHT = 0.3
VECTOR_WEIGHT = 0.7
MAX_QUERY_CHARS = 500
MAX_LIMIT = 50
DEFAULT_LIMIT = 5
CANDIDATES_PER_SIDE = 50  # at least; a larger limit takes limit * 2 from each side
SNIPPET_CHARS = 240
SCOPES = ("user", "global", "all")
# Models whose vectors have an HNSW index on ``embedding::vector(<dimensions>)`` (memory migration 0003).
INDEXED_MODELS = {embeddings.LOCAL_MODEL: embeddings.LOCAL_DIMENSIONS}
# The index's candidate list per scan step; the iterative scan goes on until enough rows pass the filters
# (bounded by pgvector's hnsw.max_scan_tuples). 400 finds 0.9-1.0 of the exact nearest even among
# near-duplicate chunks (bench.memory_search), for about a third of an exact scan's time at 10 000 chunks.
HNSW_EF_SEARCH = 400

Scope = Literal["user", "global", "all"]
Mode = Literal["fts", "hybrid"]

_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)


class SearchError(ValueError):
    """The query or its options are invalid; the message says what to change."""


@dataclass(frozen=True)
class MemoryHit:
    chunk_id: str
    document_id: str
    path: str
    heading: str
    snippet: str
    scope: Literal["user", "global"]
    score: float
    text_score: float  # the full-text rank divided by the query's best (0 when not found by words)
    vector_score: float  # cosine similarity (0 when not among the nearest or without an embedder)
    team_lead: bool = False  # from the team lead's memory (a team member's search)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "heading": self.heading,
            "snippet": self.snippet,
            "scope": self.scope,
            "score": round(self.score, 4),
            "text_score": round(self.text_score, 4),
            "vector_score": round(self.vector_score, 4),
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "team_lead": self.team_lead,
        }


@dataclass(frozen=True)
class MemorySearchResult:
    query: str
    mode: Mode
    scope: Scope
    hits: list[MemoryHit]
    embedder: str = ""  # the model the query was embedded with ("" in fts mode)
    warning: str = ""  # why a hybrid search fell back to full text
    weights: dict[str, float] = field(default_factory=lambda: {"text": TEXT_WEIGHT, "vector": VECTOR_WEIGHT})

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "scope": self.scope,
            "hits": [hit.as_dict() for hit in self.hits],
        }
        if self.mode == "hybrid":
            data["embedder"] = self.embedder
            data["weights"] = dict(self.weights)
        if self.warning:
            data["warning"] = self.warning
        return data


def validate(query: Any, *, scope: Any, limit: Any, user_id: str) -> tuple[str, Scope, int]:
    """The cleaned query, scope and limit; SearchError with a message for a model or a person."""
    if not isinstance(query, str) or not query.strip():
        raise SearchError("query is required: the words or the question to look for")
    query = " ".join(query.split())
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"query is longer than {MAX_QUERY_CHARS} characters; shorten it")
    if scope not in SCOPES:
        raise SearchError(f"scope must be one of {', '.join(SCOPES)}")
    if scope == "user" and not user_id:
        raise SearchError("scope user needs a user: this call has none (use global)")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SearchError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return query, scope, limit


def scoped_chunks(
    tenant: Tenant, agent: Agent, *, user_id: str, scope: Scope, lead: Agent | None = None
) -> QuerySet[MemoryChunk]:
    """The chunks a search may see: the tenant's, in the places reads look (``read_scopes``: the agent's
    memory for the user, then its global memory, then the team lead's when ``lead`` is given), narrowed
    by ``scope``. A document shadows those at the same path in later places, as it does for reads."""
    places = [
        place
        for place in selectors.read_scopes(tenant=tenant, agent=agent, user_id=user_id, lead=lead)
        if scope == "all" or (scope == "user") == bool(place.user_id)
    ]
    documents = MemoryDocument.objects.for_tenant(tenant)
    condition = Q(pk__in=[])
    earlier = Q(pk__in=[])
    for place in places:
        here = Q(agent_id=place.agent.pk, user_id=place.user_id)
        shadowing = documents.filter(earlier).values("path")
        condition |= here & ~Q(document__path__in=shadowing) if places.index(place) else here
        earlier |= here
    return MemoryChunk.objects.for_tenant(tenant).filter(condition)


def _columns(chunks: QuerySet[MemoryChunk]) -> QuerySet[MemoryChunk]:
    return chunks.select_related("document").only(
        "id", "document_id", "agent_id", "user_id", "heading", "text", "document__path"
    )


def full_text(chunks: QuerySet[MemoryChunk], query: str, count: int) -> list[tuple[MemoryChunk, float]]:
    """The best ``count`` chunks by ``ts_rank_cd`` of ``websearch_to_tsquery('english', query)``."""
    tsquery = SearchQuery(query, search_type="websearch", config="english")
    ranked = (
        _columns(chunks)
        .filter(search_vector=tsquery)
        .annotate(rank=SearchRank(F("search_vector"), tsquery, cover_density=True))
        .order_by("-rank", "id")[:count]
    )
    return [(chunk, float(chunk.rank)) for chunk in ranked]


def nearest(
    chunks: QuerySet[MemoryChunk], vector: list[float], embedder: str, count: int
) -> list[tuple[MemoryChunk, float]]:
    """The ``count`` chunks embedded by ``embedder`` closest to ``vector``, with cosine similarity.

    Ids first, rows second: keeping the sort narrow (id and distance, not the text) is most of the cost
    of an exact scan. For an indexed model the distance is taken on the index's expression, so that the
    planner can walk the HNSW index; its relaxed order is put right here."""
    candidates = chunks.filter(embedder=embedder, embedding__isnull=False)
    dimensions = INDEXED_MODELS.get(embedder)
    if dimensions is not None and len(vector) == dimensions:
        column = Cast("embedding", VectorField(dimensions=dimensions))
        query = (
            candidates.annotate(distance=CosineDistance(column, vector))
            .order_by("distance", "id")
            .values_list("id", "distance")[:count]
        )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                [str(max(HNSW_EF_SEARCH, count))],
            )
            ranked = sorted(query, key=lambda row: (row[1], row[0]))
    else:
        ranked = list(
            candidates.annotate(distance=CosineDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("id", "distance")[:count]
        )
    rows = {chunk.pk: chunk for chunk in _columns(chunks).filter(pk__in=[pk for pk, _ in ranked])}
    return [(rows[pk], 1.0 - float(distance)) for pk, distance in ranked if pk in rows]


def snippet(text: str, query: str) -> str:
    """About SNIPPET_CHARS of ``text``, around the first word of the query it contains (else its start)."""
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    lowered = flat.lower()
    positions = [
        found
        for word in _WORD.findall(query.lower())
        if (found := lowered.find(word[: max(4, len(word) - 2)])) >= 0
    ]
    start = max(0, min(positions) - SNIPPET_CHARS // 3) if positions else 0
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    end = start + SNIPPET_CHARS
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + SNIPPET_CHARS // 2 else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def _hit(
    chunk: MemoryChunk,
    query: str,
    text_score: float,
    vector_score: float,
    score: float,
    *,
    lead: Agent | None,
) -> MemoryHit:
    return MemoryHit(
        chunk_id=str(chunk.pk),
        document_id=str(chunk.document_id),
        path=chunk.document.path,
        heading=chunk.heading,
        snippet=snippet(chunk.text, query),
        scope="user" if chunk.user_id else "global",
        score=score,
        text_score=text_score,
        vector_score=vector_score,
        team_lead=lead is not None and chunk.agent_id == lead.pk,
    )


def merge(
    query: str,
    text_ranked: list[tuple[MemoryChunk, float]],
    vector_ranked: list[tuple[MemoryChunk, float]],
    limit: int,
    *,
    lead: Agent | None = None,
) -> list[MemoryHit]:
    """The weighted merge described in the module docstring, best first (ties: the lower chunk id)."""
    best = max((rank for _, rank in text_ranked), default=0.0) or 1.0
    parts: dict[uuid.UUID, list[Any]] = {}
    for chunk, rank in text_ranked:
        parts[chunk.pk] = [chunk, rank / best, 0.0]
    for chunk, similarity in vector_ranked:
        entry = parts.setdefault(chunk.pk, [chunk, 0.0, 0.0])
        entry[2] = min(1.0, max(0.0, similarity))
    scored = sorted(
        (
            (TEXT_WEIGHT * text + VECTOR_WEIGHT * vector, chunk.pk, chunk, text, vector)
            for chunk, text, vector in parts.values()
        ),
        key=lambda row: (-row[0], row[1]),
    )
    return [
        _hit(chunk, query, text, vector, score, lead=lead) for score, _, chunk, text, vector in scored[:limit]
    ]


def hybrid_search(
    tenant: Tenant,
    agent: Agent,
    query: str,
    *,
    user_id: str = "",
    scope: Scope = "all",
    limit: int = DEFAULT_LIMIT,
    embedder: embeddings.Embedder | Literal["tenant"] | None = "tenant",
    lead: Agent | None = None,
) -> MemorySearchResult:
    """Search ``agent``'s memory in ``tenant`` (and its team lead's, given ``lead``, as a team member
    reads it). ``embedder`` defaults to the tenant's (:func:`apps.memory.embeddings.for_tenant`); pass
    None to search on full text alone.

    Raises SearchError for an invalid query, scope or limit. An embedder that fails does not fail the
    search: it falls back to full text and the result's ``warning`` says why.
    """
    query, scope, limit = validate(query, scope=scope, limit=limit, user_id=user_id)
    chunks = scoped_chunks(tenant, agent, user_id=user_id, scope=scope, lead=lead)
    count = max(CANDIDATES_PER_SIDE, limit * 2)
    warning = ""
    vector: list[float] | None = None
    try:
        model = embeddings.for_tenant(tenant) if embedder == "tenant" else embedder
        if model is not None:
            vector = model.embed([query])[0]
    except embeddings.EmbedderError as exc:
        model = None
        warning = f"vector search is unavailable ({exc}); these are full-text results"
        logger.warning("memory search fell back to full text", extra={"tenant": str(tenant.pk)})
    text_ranked = full_text(chunks, query, count)
    if model is None or vector is None:
        best = max((rank for _, rank in text_ranked), default=0.0) or 1.0
        hits = [
            _hit(chunk, query, rank / best, 0.0, rank / best, lead=lead)
            for chunk, rank in text_ranked[:limit]
        ]
        return MemorySearchResult(query=query, mode="fts", scope=scope, hits=hits, warning=warning)
    vector_ranked = nearest(chunks, vector, model.name, count)
    return MemorySearchResult(
        query=query,
        mode="hybrid",
        scope=scope,
        hits=merge(query, text_ranked, vector_ranked, limit, lead=lead),
        embedder=model.name,
    )
