"""A memory file written through daphne is indexed by a real django-q2 worker."""

from __future__ import annotations

import time

import httpx
import pytest

from apps.memory.models import MemoryChunk, MemoryDocument
from apps.tenants import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def wait_for(check, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_memory_write_is_chunked_by_the_worker(tenant_a, live):
    live.qcluster()
    daphne = live.daphne()
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    key = factories.make_api_key(tenant_a, Role.MEMBER)
    content = "# Plan\n\nShip the release on Friday.\n\n## Risks\n\nThe database migration is slow.\n"
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        response = api.post(
            "/api/v1/runtime/execute",
            json={
                "agent": "bot",
                "tool": "write_file",
                "args": {"path": "memory/plan.md", "content": content},
                "context": {"user_id": "alice"},
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["is_error"] is False

    documents = MemoryDocument.objects.for_tenant(tenant_a)
    indexed = wait_for(
        lambda: documents.filter(path="memory/plan.md", index_status="indexed").first(),
        "the worker indexes the written document",
    )
    assert indexed.user_id == "alice"
    rows = MemoryChunk.objects.for_tenant(tenant_a).filter(document=indexed).order_by("ordinal")
    assert [(c.heading, c.text) for c in rows] == [
        ("Plan", "Ship the release on Friday."),
        ("Plan > Risks", "The database migration is slow."),
    ]
