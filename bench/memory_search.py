"""Memory search latency over 10 000 chunks of one agent: ``apps.memory.search.hybrid_search`` (the
query embedded with the local all-MiniLM-L6-v2 model, full text merged with cosine similarity) and the
same search on full text alone. Goal: hybrid p50 < 50 ms.

The data: one agent of the bench tenant holds 10 000 chunks (500 documents of 20 chunks, about 80 words
each, built from the words of the test corpus, so common words match many chunks); as noise, another
agent of the same tenant holds 2 000 and another tenant 10 000. Vectors are real model embeddings of
500 distinct texts, each reused with its own small random perturbation (re-normalised), because
embedding 22 000 texts on a CPU would take minutes and the search's cost does not depend on it.

Queries are those of tests/memory/corpus/queries.json (keywords and paraphrases), each run ``--runs``
times after a warm-up. The query's embedding is part of the hybrid time; the same search with the
query embedded beforehand (the database's share) and the embedding alone are reported too.

``python -m bench.memory_search`` (its own throwaway database) or as part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
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
DISTINCT_VECTORS = 500
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


def seed(tenant: Tenant) -> tuple[Agent, float]:
    """The chunks described in the module docstring; returns the measured agent and the seconds taken."""
    from apps.memory.embeddings import LocalEmbedder
    from apps.tenants import services
    from apps.tenants.actors import Actor

    started = time.monotonic()
    rng = random.Random(7)  # noqa: S311 - reproducible bench data, nothing secret
    words = _vocabulary()
    texts = [" ".join(rng.choices(words, k=WORDS_PER_CHUNK)) for _ in range(DISTINCT_VECTORS)]
    vectors = LocalEmbedder().embed(texts)
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

    rows = [
        ("hybrid_search (embedding + full text + vectors)", _time(hybrid, queries, runs)),
        ("hybrid_search, query embedded beforehand (database part)", _time(hybrid_embedded, queries, runs)),
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
