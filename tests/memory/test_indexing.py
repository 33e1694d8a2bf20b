"""Indexing memory documents: the job queued by a write chunks the document, keeps the database's
full-text vector, adds embeddings when the tenant has an embedder, records an embedder's failure, and
does nothing twice for the same content."""

from __future__ import annotations

import pytest
from django.contrib.postgres.search import SearchQuery

from apps.accounts import services as tenant_services
from apps.memory import embeddings, services, tasks
from apps.memory.embeddings import EmbedderError
from apps.memory.models import EmbeddingSettings, MemoryChunk, MemoryDocument
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant

pytestmark = pytest.mark.django_db

GUIDE = (
    "# Deployment\n\nWe deploy with blue-green releases every Tuesday.\n\n"
    "## Rollback\n\nRollbacks switch the router back to the previous colour.\n"
)


class Letters:
    """An embedder for tests: a vector of letter counts (a..c), and how often it was asked."""

    name = "letters-3"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(text.count(letter)) for letter in "abc"] for text in texts]


class Broken:
    name = "broken"

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbedderError("the embeddings endpoint answered 401: check the API key")


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def write(tenant: Tenant, agent: Agent, path: str, content: str, user_id: str = "") -> MemoryDocument:
    return services.document_write(
        actor=Actor.system(tenant), agent=agent, user_id=user_id, path=path, content=content
    )[0]


def index(document: MemoryDocument) -> str:
    return tasks.index_document(str(document.tenant_id), str(document.pk))


def chunks(tenant: Tenant, document: MemoryDocument):  # type: ignore[no-untyped-def]
    return MemoryChunk.objects.for_tenant(tenant).filter(document_id=document.pk).order_by("ordinal")


def reloaded(document: MemoryDocument) -> MemoryDocument:
    return MemoryDocument.objects.for_tenant(document.tenant).get(pk=document.pk)


def test_without_an_embedder_the_chunks_keep_only_full_text(tenant_a, agent):
    document = write(tenant_a, agent, "memory/guide.md", GUIDE, user_id="alice")
    assert index(document) == "indexed"

    rows = list(chunks(tenant_a, document))
    assert [(c.ordinal, c.heading) for c in rows] == [(0, "Deployment"), (1, "Deployment > Rollback")]
    assert rows[0].text == "We deploy with blue-green releases every Tuesday."
    assert {(c.agent_id, c.user_id) for c in rows} == {(agent.pk, "alice")}
    assert all(c.embedding is None and c.embedder == "" for c in rows)

    def found(words: str) -> list[int]:
        query = SearchQuery(words, config="english")
        rows = MemoryChunk.objects.for_tenant(tenant_a).filter(search_vector=query).order_by("ordinal")
        return [c.ordinal for c in rows]

    assert found("Tuesdays") == [0]
    assert found("rollback") == [1]
    assert found("deploying") == [0, 1]  # the heading path is searched too
    done = reloaded(document)
    assert done.index_status == "indexed"
    assert done.indexed_hash == done.content_hash
    assert done.indexed_at is not None


def test_with_an_embedder_every_chunk_has_its_vector_and_model(tenant_a, agent, monkeypatch):
    letters = Letters()
    monkeypatch.setattr(embeddings, "for_tenant", lambda tenant: letters)
    document = write(tenant_a, agent, "MEMORY.md", "# abc\n\naab\n\n# c\n\ncc")
    assert index(document) == "indexed"
    rows = list(chunks(tenant_a, document))
    # The heading is embedded with the text: "abc\n\naab" has a 3, b 2, c 1.
    assert [list(c.embedding) for c in rows] == [[3.0, 2.0, 1.0], [0.0, 0.0, 3.0]]
    assert {c.embedder for c in rows} == {"letters-3"}


def test_the_same_content_is_not_indexed_twice_and_a_change_replaces_the_chunks(tenant_a, agent, monkeypatch):
    letters = Letters()
    monkeypatch.setattr(embeddings, "for_tenant", lambda tenant: letters)
    document = write(tenant_a, agent, "MEMORY.md", GUIDE)
    assert index(document) == "indexed"
    first_ids = set(chunks(tenant_a, document).values_list("id", flat=True))
    assert index(document) == "unchanged"
    assert letters.calls == 1
    assert set(chunks(tenant_a, document).values_list("id", flat=True)) == first_ids

    write(tenant_a, agent, "MEMORY.md", "# Only\n\none section now")
    assert reloaded(document).index_status == "pending"
    assert index(document) == "indexed"
    assert [c.text for c in chunks(tenant_a, document)] == ["one section now"]
    assert letters.calls == 2


def test_an_embedder_failure_marks_the_document_failed_and_keeps_full_text(tenant_a, agent, monkeypatch):
    monkeypatch.setattr(embeddings, "for_tenant", lambda tenant: Broken())
    document = write(tenant_a, agent, "MEMORY.md", GUIDE)
    assert index(document) == "failed"
    failed = reloaded(document)
    assert failed.index_status == "failed"
    assert failed.index_error == "embedding failed: the embeddings endpoint answered 401: check the API key"
    assert chunks(tenant_a, document).count() == 2
    assert all(c.embedding is None for c in chunks(tenant_a, document))

    monkeypatch.setattr(embeddings, "for_tenant", lambda tenant: Letters())
    assert index(document) == "indexed"  # a failed document is tried again
    assert reloaded(document).index_error == ""


def test_a_configured_embedder_that_cannot_run_is_a_failure_not_a_crash(tenant_a, agent):
    EmbeddingSettings.objects.create(
        tenant=tenant_a, kind="openai", base_url="http://127.0.0.1:9/v1", model="text-embedding-3-small"
    )
    document = write(tenant_a, agent, "MEMORY.md", GUIDE)
    assert index(document) == "failed"
    assert reloaded(document).index_error.startswith("embedding failed: ")
    assert chunks(tenant_a, document).count() == 2


def test_other_files_and_gone_documents_are_left_alone(tenant_a, agent, tenant_b):
    data = write(tenant_a, agent, "memory/data.json", '{"a": 1}')
    assert reloaded(data).index_status == "skipped"
    assert index(data) == "unchanged"
    assert not chunks(tenant_a, data).exists()

    document = write(tenant_a, agent, "MEMORY.md", GUIDE)
    assert tasks.index_document(str(tenant_b.pk), str(document.pk)) == "gone"  # another tenant's id
    assert not chunks(tenant_a, document).exists()
    services.document_delete(actor=Actor.system(tenant_a), agent=agent, document=document)
    assert index(document) == "gone"


def test_deleting_a_document_deletes_its_chunks(tenant_a, agent):
    document = write(tenant_a, agent, "MEMORY.md", GUIDE)
    index(document)
    assert chunks(tenant_a, document).count() == 2
    services.document_delete(actor=Actor.system(tenant_a), agent=agent, document=document)
    assert not MemoryChunk.objects.for_tenant(tenant_a).exists()


def test_a_write_queues_one_index_job_after_commit(tenant_a, agent, django_capture_on_commit_callbacks):
    from django_q.models import OrmQ

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        document = write(tenant_a, agent, "memory/a.md", "text")
        assert not OrmQ.objects.exists()  # nothing is queued inside the transaction
    assert len(callbacks) == 1
    callbacks[0]()
    [job] = OrmQ.objects.all()
    assert job.func() == "apps.memory.tasks.index_document"
    assert job.task["args"] == (str(tenant_a.pk), str(document.pk))

    with django_capture_on_commit_callbacks(execute=True):
        write(tenant_a, agent, "memory/b.json", "{}")
    assert OrmQ.objects.count() == 1  # only Markdown is indexed
