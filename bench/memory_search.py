"""Memory search latency over 10 000 chunks of one agent: ``apps.memory.search.hybrid_search`` (the
query embedded with the local all-MiniLM-L6-v2 model, full text merged with cosine similarity) and the
same search on full text alone. Goal: hybrid p50 < 50 ms.

The data: one agent of the bench tenant holds 10 000 chunks (500 documents of 20 chunks, about 80 words
each, built from the words of the test corpus, so common words match many chunks); as noise, another
agent of the same tenant holds 2 000 and another tenant 10 000. Vectors are real model embeddings of
10 000 distinct texts, one per chunk of the measured agent, each with a small random perturbation
(re-normalised); the noise reuses them with their own perturbation. Embedding them takes minutes on a
CPU, so they are kept under ``$TOOLGATE_DATA_DIR/bench/`` for the next run. The vector side walks an
HNSW index (memory migration 0003); the report gives its plan, its recall of the exact nearest chunks,
and the time of the same searches with an exact scan.

Queries are those of tests/memory/corpus/queries.json (keywords and paraphrases), each run ``--runs``
times after a warm-up. The query's embedding is part of the hybrid time; the same search with the
query embedded beforehand (the database's share) and the embedding alone are reported too.

``python -m bench.memory_search`` (its own throwaway database) or as part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

CHUNKS = 10_000
CHUNKS_PER_DOCUMENT = 20
NOISE_SAME_TENANT = 2_000
NOISE_OTHER_TENANT = 10_000
DISTINCT_VECTORS = CHUNKS
WORDS_PER_CHUNK = 80
RUNS = 5
GOAL_P50_MS = 50.0
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "memory" / "corpus"


def _vocabulary() -> list[str]:
    words: set[str] = set()
    for path in CORPUS.glob("*.md"):
        for raw in path.read_text().split():
            word = raw.strip(".,;:()#'\"").lower()
            if word.isalpha() and len(word) > 2:
                words.add(word)
    return sorted(words)


def _seed_agent(
    tenant: Tenant,
    agent: Agent,
    *,
    chunks: int,
    vectors: list[list[float]],
    rng: random.Random,
    words: list[str],
) -> None:
    from apps.memory.embeddings import LOCAL_MODEL
    from apps.memory.models import MemoryChunk, MemoryDocument

    documents = MemoryDocument.objects.bulk_create(
        MemoryDocument(
            tenant=tenant,
            agent=agent,
            user_id="" if n % 4 else "user-1",
            path=f"memory/notes-{n:04d}.md",
            index_status=MemoryDocument.IndexStatus.INDEXED,
        )
        for n in range(chunks // CHUNKS_PER_DOCUMENT)
    )
    import torch

    # torch, as the model uses: numpy's BLAS threads would keep spinning and slow the model down.
    noise = torch.Generator().manual_seed(rng.randrange(2**32))
    base = torch.tensor(vectors, dtype=torch.float32)
    noisy = base[torch.arange(chunks) % len(base)] + 0.01 * torch.randn(
        chunks, base.shape[1], generator=noise
    )
    noisy = torch.nn.functional.normalize(noisy, dim=1)
    rows = []
    for n in range(chunks):
        document = documents[n // CHUNKS_PER_DOCUMENT]
        rows.append(
            MemoryChunk(
                tenant=tenant,
                agent=agent,
                document=document,
                user_id=document.user_id,
                ordinal=n % CHUNKS_PER_DOCUMENT,
                heading=" ".join(rng.choices(words, k=3)).capitalize(),
                text=" ".join(rng.choices(words, k=WORDS_PER_CHUNK)),
                embedding=noisy[n].tolist(),
                embedder=LOCAL_MODEL,
            )
        )
    MemoryChunk.objects.bulk_create(rows, batch_size=1000)


def _embedded(texts: list[str]) -> list[list[float]]:
    """The local model's vectors of ``texts``, kept in the data directory by the texts' digest."""
    import torch

    from apps.memory.embeddings import LocalEmbedder
    from config.embedded_db import data_dir

    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = data_dir() / "bench" / f"memory-vectors-{digest}.pt"
    if path.exists():
        return list(torch.load(path).tolist())
    vectors = LocalEmbedder().embed(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torch.tensor(vectors, dtype=torch.float32), path)
    return vectors


def seed(tenant: Tenant) -> tuple[Agent, float]:
    """The chunks described in the module docstring; returns the measured agent and the seconds taken."""
    from apps.accounts import services
    from apps.tenants.actors import Actor

    started = time.monotonic()
    rng = random.Random(7)  # noqa: S311 - reproducible bench data, nothing secret
    words = _vocabulary()
    texts = [" ".join(rng.choices(words, k=WORDS_PER_CHUNK)) for _ in range(DISTINCT_VECTORS)]
    vectors = _embedded(texts)
    system = Actor.system(tenant)
    agent = services.agent_create(actor=system, key="memory-bench", name="Memory bench")
    neighbour = services.agent_create(actor=system, key="memory-bench-2", name="Memory bench 2")
    other = services.tenant_create(slug="bench-memory-noise", name="Bench memory noise")
    stranger = services.agent_create(actor=Actor.system(other), key="memory-bench", name="Noise")
    _seed_agent(tenant, agent, chunks=CHUNKS, vectors=vectors, rng=rng, words=words)
    _seed_agent(tenant, neighbour, chunks=NOISE_SAME_TENANT, vectors=vectors, rng=rng, words=words)
    _seed_agent(other, stranger, chunks=NOISE_OTHER_TENANT, vectors=vectors, rng=rng, words=words)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memorychunk")
    return agent, time.monotonic() - started


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _time(function: Any, queries: list[str], runs: int) -> list[float]:
    for query in queries:  # warm-up: plans, model, caches
        function(query)
    samples = []
    for _ in range(runs):
        for query in queries:
            started = time.perf_counter()
            function(query)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def _vector_plan(tenant: Tenant, agent: Agent, vector: list[float]) -> str:
    """Whether the planner walks the HNSW index for the vector side of a search (EXPLAIN)."""
    from django.db import connection, transaction
    from django.db.models.functions import Cast
    from pgvector.django import CosineDistance, VectorField

    from apps.memory.embeddings import LOCAL_DIMENSIONS, LOCAL_MODEL
    from apps.memory.search import scoped_chunks

    column = Cast("embedding", VectorField(dimensions=LOCAL_DIMENSIONS))
    query = (
        scoped_chunks(tenant, agent, user_id="user-1", scope="all")
        .filter(embedder=LOCAL_MODEL, embedding__isnull=False)
        .annotate(distance=CosineDistance(column, vector))
        .order_by("distance", "id")
        .values_list("id", "distance")[:50]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        plan = query.explain()
    return "HNSW index scan" if "memory_chunk_minilm_hnsw" in plan else "exact scan:\n" + plan


def _index_recall(tenant: Tenant, agent: Agent, vectors: list[list[float]], k: int = 50) -> float:
    """The share of the exact ``k`` nearest chunks the HNSW index returns too, over the bench queries."""
    from django.db import connection

    from apps.memory.embeddings import LOCAL_MODEL
    from apps.memory.search import nearest, scoped_chunks

    chunks = scoped_chunks(tenant, agent, user_id="user-1", scope="all")

    def ids() -> list[set[Any]]:
        return [{chunk.pk for chunk, _ in nearest(chunks, vector, LOCAL_MODEL, k)} for vector in vectors]

    indexed = ids()
    with connection.cursor() as cursor:
        cursor.execute("SET enable_indexscan = off")
    try:
        exact = ids()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_indexscan")
    return sum(len(a & b) for a, b in zip(indexed, exact, strict=True)) / sum(len(b) for b in exact)


def _exact(timer: Any, function: Any, queries: list[str], runs: int) -> list[float]:
    """``timer`` with index scans turned off for the connection: the exact scan, for comparison."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET enable_indexscan = off")
    try:
        return list(timer(function, queries, runs))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_indexscan")


def run(*, tenant: Tenant, runs: int = RUNS) -> list[str]:
    """Seed, measure and return the report lines."""
    from apps.memory.embeddings import LocalEmbedder
    from apps.memory.search import hybrid_search

    agent, seeded = seed(tenant)
    queries = [case["query"] for case in json.loads((CORPUS / "queries.json").read_text())]
    local = LocalEmbedder()

    def hybrid(query: str) -> None:
        result = hybrid_search(tenant, agent, query, user_id="user-1", scope="all", limit=5, embedder=local)
        assert result.mode == "hybrid", result.warning

    def full_text(query: str) -> None:
        result = hybrid_search(tenant, agent, query, user_id="user-1", scope="all", limit=5, embedder=None)
        assert result.mode == "fts"

    embedded = {query: local.embed([query])[0] for query in queries}

    class Embedded:
        """The local model's vectors of the bench queries, computed beforehand: the database's share."""

        name = local.name

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [embedded[text] for text in texts]

    def hybrid_embedded(query: str) -> None:
        result = hybrid_search(
            tenant, agent, query, user_id="user-1", scope="all", limit=5, embedder=Embedded()
        )
        assert result.mode == "hybrid", result.warning

    plan = _vector_plan(tenant, agent, embedded[queries[0]])
    vectors = [embedded[query] for query in queries]
    recall = {k: _index_recall(tenant, agent, vectors, k) for k in (5, 50)}
    rows = [
        ("hybrid_search (embedding + full text + vectors)", _time(hybrid, queries, runs)),
        ("hybrid_search, query embedded beforehand (database part)", _time(hybrid_embedded, queries, runs)),
        ("the same, exact vector scan (index scans off)", _exact(_time, hybrid_embedded, queries, runs)),
        ("full text only", _time(full_text, queries, runs)),
        ("query embedding alone (all-MiniLM-L6-v2, CPU)", _time(lambda q: local.embed([q]), queries, runs)),
    ]
    hybrid_p50 = statistics.median(rows[0][1])
    lines = [
        f"Memory search (bench.memory_search): {CHUNKS} chunks of one agent, plus {NOISE_SAME_TENANT} of "
        f"another agent and {NOISE_OTHER_TENANT} of another tenant; {len(queries)} queries x {runs} runs "
        f"(seeded in {seeded:.1f}s); {platform.machine()} with {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "",
        "| search | p50 ms | p95 ms | max ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, samples in rows:
        lines.append(
            f"| {label} | {statistics.median(samples):.1f} | {_percentile(samples, 0.95):.1f} "
            f"| {max(samples):.1f} |"
        )
    lines.append(
        f"\nVector plan: {plan}; the share of the exact nearest chunks it finds: {recall[5]:.3f} of the "
        f"first 5, {recall[50]:.3f} of the first 50 (the candidates merged with full text)."
    )
    verdict = "met" if hybrid_p50 < GOAL_P50_MS else "NOT met"
    lines.append(f"\nGoal hybrid p50 < {GOAL_P50_MS:.0f} ms: {verdict} ({hybrid_p50:.1f} ms).")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory_search", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs of every query (default {RUNS})")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs is at least 1")

    from bench import db

    return db.with_bench_tenant(lambda tenant: run(tenant=tenant, runs=args.runs))


if __name__ == "__main__":
    from bench.db import standalone

    standalone(main)
