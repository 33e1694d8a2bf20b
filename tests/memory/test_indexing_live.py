"""Memory across real processes: a memory file an agent writes through daphne is indexed by a real
django-q2 worker, and both the write and the indexing arrive live on the ``memory`` topic for
administrators (never the text); members may not subscribe to it."""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.memory.models import MemoryChunk, MemoryDocument
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.conftest import daphne, sockets  # noqa: F401
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CONTENT = "# Plan\n\nShip the release on Friday.\n\n## Risks\n\nThe database migration is slow.\n"


def wait_for(check, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_memory_write_is_chunked_by_the_worker_and_published(
    tenant_a,
    live: LiveProcesses,
    daphne: str,  # noqa: F811
    sockets: contextlib.ExitStack,  # noqa: F811
):
    live.qcluster()
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    admin = sockets.enter_context(
        open_socket(live.ws_url, api_key=factories.make_api_key(tenant_a, Role.ADMIN))
    )
    assert "memory" in admin.recv()["topics"]
    assert admin.subscribe(["memory"])["topics"] == ["memory"]
    key = factories.make_api_key(tenant_a, Role.MEMBER)
    member = sockets.enter_context(open_socket(live.ws_url, api_key=key))
    assert "memory" not in member.recv()["topics"]
    reply = member.request({"type": "subscribe", "topics": ["memory"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
        response = api.post(
            "/api/v1/runtime/execute",
            json={
                "agent": "bot",
                "tool": "write_file",
                "args": {"path": "memory/plan.md", "content": CONTENT},
                "context": {"user_id": "alice"},
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["is_error"] is False

    written = admin.wait_for(lambda m: event_of(m, topic="memory", type="memory.document_created"))["event"]
    assert (written["data"]["agent"], written["data"]["path"], written["data"]["user_id"]) == (
        "bot",
        "memory/plan.md",
        "alice",
    )
    indexed = admin.wait_for(lambda m: event_of(m, topic="memory", type="memory.document_indexed"))["event"]
    assert (indexed["data"]["index_status"], indexed["data"]["chunks"]) == ("indexed", 2)
    assert "Friday" not in str(written) + str(indexed)

    documents = MemoryDocument.objects.for_tenant(tenant_a)
    document = wait_for(
        lambda: documents.filter(path="memory/plan.md", index_status="indexed").first(),
        "the worker indexes the written document",
    )
    assert document.user_id == "alice"
    rows = MemoryChunk.objects.for_tenant(tenant_a).filter(document=document).order_by("ordinal")
    assert [(c.heading, c.text) for c in rows] == [
        ("Plan", "Ship the release on Friday."),
        ("Plan > Risks", "The database migration is slow."),
    ]
