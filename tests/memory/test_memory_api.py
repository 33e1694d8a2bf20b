"""The memory API: /api/v1/agents/<key>/memory/ and /api/v1/agents/<key>/memory/<path>?user_id=."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django_q.models import OrmQ

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.memory import services, tasks
from apps.memory.models import MAX_DOCUMENT_CHARS, MemoryChunk, MemoryDocument
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

LIST = "/api/v1/agents/bot/memory/"
NOTES = LIST + "memory/notes.md"
SECRET_TEXT = "the launch code is 0000"


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def write(tenant: Tenant, agent: Agent, path: str, content: str, user_id: str = "") -> MemoryDocument:
    return services.document_write(
        actor=Actor.system(tenant), agent=agent, user_id=user_id, path=path, content=content
    )[0]


@pytest.fixture
def notes(tenant_a: Tenant, agent: Agent) -> MemoryDocument:
    write(tenant_a, agent, "MEMORY.md", "global facts")
    write(tenant_a, agent, "memory/notes.md", "alice's notes", user_id="alice")
    return write(tenant_a, agent, "memory/notes.md", f"# Notes\n\n{SECRET_TEXT}")


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    """What was delivered on tenant A's ``memory`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "memory"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def queued_index_jobs() -> list[tuple[Any, ...]]:
    return [
        task.task["args"] for task in OrmQ.objects.all() if task.func() == "apps.memory.tasks.index_document"
    ]


def test_the_list_shows_every_users_documents_without_content(viewer_a, notes, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        body = viewer_a.get(LIST).json()
    assert body["count"] == 3
    rows = [(row["path"], row["user_id"]) for row in body["results"]]
    assert rows == [("MEMORY.md", ""), ("memory/notes.md", ""), ("memory/notes.md", "alice")]
    first = body["results"][1]
    assert first["size"] == len(f"# Notes\n\n{SECRET_TEXT}")
    assert first["index_status"] == "pending"
    assert set(first) == {
        *("id", "path", "user_id", "size", "index_status", "index_error", "indexed_at", "updated_by"),
        *("created_at", "updated_at"),
    }
    assert SECRET_TEXT not in str(body)


def test_the_list_filters_by_user_and_path_prefix_and_pages(viewer_a, notes, tenant_a, agent):
    only_alice = viewer_a.get(LIST, {"user_id": "alice"}).json()
    assert [(r["path"], r["user_id"]) for r in only_alice["results"]] == [("memory/notes.md", "alice")]
    only_global = viewer_a.get(LIST, {"user_id": ""}).json()
    assert {r["user_id"] for r in only_global["results"]} == {""}
    assert only_global["count"] == 2
    folder = viewer_a.get(LIST, {"path": "memory/"}).json()
    assert {r["path"] for r in folder["results"]} == {"memory/notes.md"}
    page = viewer_a.get(LIST, {"page_size": 2, "page": 2}).json()
    assert [r["user_id"] for r in page["results"]] == ["alice"]
    error(viewer_a.get(LIST, {"page_size": 500}), 400, "invalid")
    error(viewer_a.get(LIST, {"colour": "red"}), 400, "invalid")


def test_one_document_with_its_content_and_chunks(viewer_a, notes, tenant_a):
    tasks.index_document(str(tenant_a.pk), str(notes.pk))
    body = viewer_a.get(NOTES).json()
    assert body["content"] == f"# Notes\n\n{SECRET_TEXT}"
    assert body["user_id"] == ""
    assert body["index_status"] == "indexed"
    assert body["chunks"] == 1
    alice = viewer_a.get(NOTES, {"user_id": "alice"}).json()
    assert alice["content"] == "alice's notes"
    error(viewer_a.get(NOTES, {"user_id": "bob"}), 404, "not_found")
    error(viewer_a.get(LIST + "memory/missing.md"), 404, "not_found")
    error(viewer_a.get(LIST + "notes.md"), 400, "invalid")
    error(viewer_a.get("/api/v1/agents/nobody/memory/MEMORY.md"), 404, "not_found")


def test_put_creates_then_replaces_audits_publishes_and_queues_indexing(
    admin_a, agent, tenant_a, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        created = admin_a.put(NOTES + "?user_id=carol", {"content": "# Hello\n\nworld"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["user_id"] == "carol"
    assert created.json()["index_status"] == "pending"
    document = MemoryDocument.objects.for_tenant(tenant_a).get(user_id="carol")
    assert queued_index_jobs() == [(str(tenant_a.pk), str(document.pk))]

    tasks.index_document(str(tenant_a.pk), str(document.pk))
    with django_capture_on_commit_callbacks(execute=True):
        same = admin_a.put(NOTES + "?user_id=carol", {"content": "# Hello\n\nworld"}, format="json")
    assert same.status_code == 200
    assert same.json()["index_status"] == "pending"  # PUT indexes again even when nothing changed
    assert len(queued_index_jobs()) == 2
    assert tasks.index_document(str(tenant_a.pk), str(document.pk)) == "indexed"

    verbs = [
        e.verb
        for e in AuditEvent.objects.for_tenant(tenant_a)
        .filter(target_type="memory_document")
        .order_by("created_at")
    ]
    assert verbs == ["memory.document_created", "memory.document_updated"]
    types = [e["type"] for e in published()]
    assert types == [
        "memory.document_created",
        "memory.document_indexed",
        "memory.document_updated",
        "memory.document_indexed",
    ]
    assert "world" not in str(published())


def test_put_validates_its_input(admin_a, agent, tenant_a):
    before = tenant_state(tenant_a)
    assert "content" in error(admin_a.put(NOTES, {}, format="json"), 400, "invalid")["details"]
    wrong = error(admin_a.put(NOTES, {"content": 7}, format="json"), 400, "invalid")
    assert wrong["details"]["content"] == ["Must be a string, got number."]
    unknown = error(admin_a.put(NOTES, {"content": "x", "path": "y"}, format="json"), 400, "invalid")
    assert unknown["details"]["path"] == ["Unknown field."]
    big = error(
        admin_a.put(NOTES, {"content": "x" * (MAX_DOCUMENT_CHARS + 1)}, format="json"), 400, "invalid"
    )
    assert "content" in big["details"]
    not_memory = error(admin_a.put(LIST + "notes.md", {"content": "x"}, format="json"), 400, "invalid")
    assert "not a memory path" in not_memory["message"]
    climbing = error(admin_a.put(LIST + "memory/../etc.md", {"content": "x"}, format="json"), 400, "invalid")
    assert "without '..'" in climbing["message"]
    long_user = error(
        admin_a.put(NOTES + "?user_id=" + "u" * 300, {"content": "x"}, format="json"), 400, "invalid"
    )
    assert "user_id" in long_user["details"]
    assert tenant_state(tenant_a) == before


def test_delete_removes_the_document_and_its_chunks(admin_a, notes, tenant_a, published):
    tasks.index_document(str(tenant_a.pk), str(notes.pk))
    assert MemoryChunk.objects.for_tenant(tenant_a).filter(document=notes).exists()
    response = admin_a.delete(NOTES)
    assert response.status_code == 204
    assert not MemoryDocument.objects.for_tenant(tenant_a).filter(pk=notes.pk).exists()
    assert not MemoryChunk.objects.for_tenant(tenant_a).filter(document_id=notes.pk).exists()
    assert MemoryDocument.objects.for_tenant(tenant_a).filter(user_id="alice").exists()
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="memory.document_deleted")
    assert event.data["path"] == "memory/notes.md"
    assert published()[-1]["type"] == "memory.document_deleted"
    error(admin_a.delete(NOTES), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "url", "body", "least", "success"),
    [
        ("get", LIST, None, "viewer", 200),
        ("get", NOTES, None, "viewer", 200),
        ("put", NOTES, {"content": "replaced"}, "admin", 200),
        ("delete", NOTES, None, "admin", 204),
    ],
)
def test_personas(request, tenant_a, notes, method, url, body, least, success):
    check_personas(
        request,
        tenant_a,
        method=method,
        url=url,
        body=body,
        least=least,
        success=success,
        outsider_status=404,
        never_shown_to_outsider=(SECRET_TEXT, "alice"),
    )


def test_the_services_refuse_another_tenants_agent_and_document(tenant_a, tenant_b, notes, agent):
    from apps.tenants.errors import ServiceError

    b = Actor.system(tenant_b)
    before = tenant_state(tenant_a)
    with pytest.raises(ServiceError, match="an agent of this tenant only"):
        services.document_write(actor=b, agent=agent, user_id="", path="MEMORY.md", content="x")
    with pytest.raises(ServiceError, match="a document of this agent only"):
        services.document_delete(actor=b, agent=agent, document=notes)
    assert tenant_state(tenant_a) == before
    assert not MemoryDocument.objects.for_tenant(tenant_b).exists()
