"""Search quality: hybrid search (full text + all-MiniLM-L6-v2 vectors) against full text alone, on the
corpus shipped in tests/memory/corpus/ (56 short Markdown notes on office, engineering and product
topics) and its queries (queries.json: the note each query should find; paraphrases share no word stem
with their answer). Both recall@5 figures are printed (pytest -s shows them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from apps.accounts import services
from apps.memory.embeddings import LOCAL_MODEL, LocalEmbedder
from apps.memory.models import EmbeddingSettings, MemoryChunk, MemoryDocument
from apps.memory.search import hybrid_search
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db

CORPUS = Path(__file__).parent / "corpus"
QUERIES = json.loads((CORPUS / "queries.json").read_text())


def load_corpus(tenant, agent) -> int:
    """One document and one chunk per note (the notes are a paragraph each), embedded like indexing
    embeds: heading, blank line, text."""
    documents, pieces = [], []
    for path in sorted(CORPUS.glob("*.md")):
        content = path.read_text()
        title, _, body = content.partition("\n")
        heading, text = title.removeprefix("# ").strip(), body.strip()
        documents.append(
            MemoryDocument(tenant=tenant, agent=agent, path=f"memory/{path.name}", content=content)
        )
        pieces.append((heading, text))
    MemoryDocument.objects.bulk_create(documents)
    vectors = LocalEmbedder().embed([f"{heading}\n\n{text}" for heading, text in pieces])
    MemoryChunk.objects.bulk_create(
        MemoryChunk(
            tenant=tenant,
            agent=agent,
            document=document,
            ordinal=0,
            heading=heading,
            text=text,
            embedding=vector,
            embedder=LOCAL_MODEL,
        )
        for document, (heading, text), vector in zip(documents, pieces, vectors, strict=True)
    )
    return len(documents)


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def corpus(tenant_a, agent) -> int:
    EmbeddingSettings.objects.create(tenant=tenant_a, kind=EmbeddingSettings.Kind.LOCAL)
    return load_corpus(tenant_a, agent)


def recall_at_5(tenant, agent, *, hybrid: bool) -> tuple[float, list[str]]:
    found, missed = 0, []
    for case in QUERIES:
        result = hybrid_search(tenant, agent, case["query"], limit=5, embedder="tenant" if hybrid else None)
        assert result.mode == ("hybrid" if hybrid else "fts")
        if f"memory/{case['expected']}" in [hit.path for hit in result.hits]:
            found += 1
        else:
            missed.append(case["query"])
    return found / len(QUERIES), missed


def test_the_corpus_is_large_and_varied_enough():
    assert len(list(CORPUS.glob("*.md"))) >= 50
    assert len(QUERIES) >= 20
    assert sum(case["paraphrase"] for case in QUERIES) >= 10
    assert all((CORPUS / case["expected"]).is_file() for case in QUERIES)


def test_paraphrases_share_no_word_stem_with_their_answer():
    for case in (c for c in QUERIES if c["paraphrase"]):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT ARRAY(SELECT unnest(tsvector_to_array(to_tsvector('english', %s))) INTERSECT "
                "SELECT unnest(tsvector_to_array(to_tsvector('english', %s))))",
                [case["query"], (CORPUS / case["expected"]).read_text()],
            )
            shared = cursor.fetchone()[0]
        assert shared == [], (case["query"], shared)


def test_hybrid_beats_full_text_on_recall_at_5(tenant_a, agent, corpus):
    fts, fts_missed = recall_at_5(tenant_a, agent, hybrid=False)
    hybrid, hybrid_missed = recall_at_5(tenant_a, agent, hybrid=True)
    print(  # noqa: T201 - the figures are the report
        f"\nmemory search recall@5 over {len(QUERIES)} queries and {corpus} documents: "
        f"full text {fts:.2f}, hybrid {hybrid:.2f}\n"
        f"  full text missed: {fts_missed}\n  hybrid missed: {hybrid_missed}"
    )
    assert hybrid > fts
    # Every keyword query is found by full text; the paraphrases only by meaning.
    keyword_queries = [c["query"] for c in QUERIES if not c["paraphrase"]]
    assert not set(keyword_queries) & set(hybrid_missed)
    assert hybrid >= 0.85


def test_paraphrases_are_found_by_meaning_alone(tenant_a, agent, corpus):
    top1 = 0
    paraphrases = [c for c in QUERIES if c["paraphrase"]]
    for case in paraphrases:
        result = hybrid_search(tenant_a, agent, case["query"], limit=5)
        assert result.hits, case["query"]
        top1 += result.hits[0].path == f"memory/{case['expected']}"
        assert all(hit.text_score == 0.0 for hit in result.hits if hit.path == f"memory/{case['expected']}")
    print(f"\nparaphrases ranked first by hybrid search: {top1} of {len(paraphrases)}")  # noqa: T201
    assert top1 / len(paraphrases) >= 0.4
