"""The memory pages of the dashboard through the Django test client: an agent's documents (filters,
index status), one document, creating, replacing and deleting one.

Personas (tests/dashboard/conftest.py): a viewer and a member of tenant A read; an admin and an owner
change; tenant B's owner, the outsider, gets 404 for A's agent with nothing changed."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.memory import services, tasks
from apps.memory.models import MemoryDocument
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.tenant_state import tenant_state
from tests.dashboard.conftest import admin, bot, member, outsider, owner, viewer  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET_TEXT = "the vault opens with 4711"


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def document_url(name: str, path: str, user: str = "") -> str:
    return f"{reverse(f'dashboard:{name}', args=['bot'])}?{urlencode({'path': path, 'user': user})}"


@pytest.fixture
def notes(tenant_a: Tenant, bot: Agent) -> MemoryDocument:  # noqa: F811
    system = Actor.system(tenant_a)
    services.document_write(actor=system, agent=bot, user_id="alice", path="MEMORY.md", content="alice's")
    document, _ = services.document_write(
        actor=system, agent=bot, user_id="", path="memory/notes.md", content=f"# Vault\n\n{SECRET_TEXT}"
    )
    tasks.index_document(str(tenant_a.pk), str(document.pk))
    return document


def test_the_list_shows_documents_and_filters(viewer, notes):  # noqa: F811
    page = body(viewer.get(reverse("dashboard:memory", args=["bot"])))
    assert 'data-path="MEMORY.md" data-user="alice"' in page
    assert 'data-path="memory/notes.md" data-user=""' in page
    assert "indexed" in page
    assert SECRET_TEXT not in page
    assert "New memory document" not in page  # viewers only read
    only_global = body(viewer.get(reverse("dashboard:memory", args=["bot"]), {"user": "-"}))
    assert 'data-user="alice"' not in only_global
    folder = body(viewer.get(reverse("dashboard:memory", args=["bot"]), {"path": "memory/"}))
    assert "MEMORY.md" not in folder.split("data-memory-documents")[1]


def test_the_list_searches_memory_as_a_user_would(viewer, notes, tenant_a):  # noqa: F811
    url = reverse("dashboard:memory", args=["bot"])
    page = body(viewer.get(url, {"q": "vault"}))
    assert "full text only" in page  # this tenant has no embedder
    hits = page.split("data-search-hits")[1]
    assert "memory/notes.md" in hits
    assert "Vault" in hits
    assert "No matches" in body(viewer.get(url, {"q": "zebra crossing"}))
    refused = body(viewer.get(url, {"q": "vault", "as_user": ""}))
    assert "data-search-hits" in refused
    assert "needs a user" not in refused


def test_a_document_page_shows_its_text_and_index(viewer, admin, notes):  # noqa: F811
    page = body(viewer.get(document_url("memory_document", "memory/notes.md")))
    assert SECRET_TEXT in page
    assert "1 chunk" in page
    assert 'data-state="indexed"' in page
    assert "Delete…" not in page
    editor = body(admin.get(document_url("memory_document", "memory/notes.md")))
    assert "Delete…" in editor
    assert viewer.get(document_url("memory_document", "memory/other.md")).status_code == 404
    assert viewer.get(document_url("memory_document", "notes.txt")).status_code == 404


def test_an_admin_creates_and_replaces_a_document(admin, owner, tenant_a, notes):  # noqa: F811
    save = reverse("dashboard:memory_document_save", args=["bot"])
    created = admin.post(save, {"path": "memory/new.md", "user_id": "carol", "content": "fresh\r\nlines"})
    assert created.status_code == 302
    assert created.url == document_url("memory_document", "memory/new.md", "carol")
    document = MemoryDocument.objects.for_tenant(tenant_a).get(path="memory/new.md")
    assert (document.user_id, document.content, document.index_status) == ("carol", "fresh\nlines", "pending")

    replaced = owner.post(save, {"path": "memory/notes.md", "user_id": "", "content": "replaced"})
    assert replaced.status_code == 302
    assert MemoryDocument.objects.for_tenant(tenant_a).get(pk=notes.pk).content == "replaced"
    verbs = set(AuditEvent.objects.for_tenant(tenant_a).values_list("verb", flat=True))
    assert {"memory.document_created", "memory.document_updated"} <= verbs


def test_a_refused_save_shows_why_and_stores_nothing(admin, tenant_a, notes):  # noqa: F811
    before = tenant_state(tenant_a)
    save = reverse("dashboard:memory_document_save", args=["bot"])
    response = admin.post(save, {"path": "notes.txt", "user_id": "", "content": "x"})
    assert response.status_code == 400
    assert "is not a memory path" in response.content.decode()
    assert tenant_state(tenant_a) == before


def test_an_admin_deletes_after_confirming(admin, tenant_a, notes):  # noqa: F811
    url = document_url("memory_document_delete", "memory/notes.md")
    assert "Delete memory/notes.md" in body(admin.get(url))
    assert MemoryDocument.objects.for_tenant(tenant_a).filter(pk=notes.pk).exists()
    done = admin.post(url)
    assert done.status_code == 302
    assert not MemoryDocument.objects.for_tenant(tenant_a).filter(pk=notes.pk).exists()


def test_viewers_and_members_cannot_change_anything(viewer, member, tenant_a, notes):  # noqa: F811
    before = tenant_state(tenant_a)
    for client in (viewer, member):
        save = reverse("dashboard:memory_document_save", args=["bot"])
        assert client.post(save, {"path": "MEMORY.md", "content": "x"}).status_code == 403
        assert client.post(document_url("memory_document_delete", "memory/notes.md")).status_code == 403
    assert tenant_state(tenant_a) == before


def test_the_outsider_gets_404_everywhere_with_nothing_changed(outsider, tenant_a, notes):  # noqa: F811
    before = tenant_state(tenant_a)
    for response in (
        outsider.get(reverse("dashboard:memory", args=["bot"])),
        outsider.get(document_url("memory_document", "memory/notes.md")),
        outsider.post(
            reverse("dashboard:memory_document_save", args=["bot"]), {"path": "MEMORY.md", "content": "x"}
        ),
        outsider.post(document_url("memory_document_delete", "memory/notes.md")),
    ):
        assert response.status_code == 404
        assert SECRET_TEXT not in response.content.decode()
    assert tenant_state(tenant_a) == before


def test_the_agents_page_links_to_memory(viewer, bot):  # noqa: F811
    page = body(viewer.get(reverse("dashboard:agents")))
    assert reverse("dashboard:memory", args=["bot"]) in page
