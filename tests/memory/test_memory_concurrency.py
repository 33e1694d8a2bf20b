"""Concurrent writes of one memory file on PostgreSQL: appends racing to create the document, and
appends to an existing one, all land (the row is locked; a lost creation race re-reads and locks)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from apps.accounts import services as tenant_services
from apps.memory import services
from apps.memory.models import MemoryDocument
from apps.memory.services import APPEND_SEPARATOR
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 6


def append_concurrently(tenant, agent, path: str) -> None:  # type: ignore[no-untyped-def]
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            start.wait()
            services.document_write(
                actor=Actor.system(tenant),
                agent=agent,
                user_id="alice",
                path=path,
                content=f"entry {index}",
                append=True,
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors


@pytest.mark.parametrize("existing", [False, True])
def test_concurrent_appends_all_land(tenant_a, existing):
    agent = tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    if existing:
        services.document_write(
            actor=Actor.system(tenant_a), agent=agent, user_id="alice", path="memory/log.md", content="start"
        )
    append_concurrently(tenant_a, agent, "memory/log.md")
    document = MemoryDocument.objects.for_tenant(tenant_a).get()
    entries = document.content.split(APPEND_SEPARATOR)
    expected = {f"entry {index}" for index in range(WRITERS)} | ({"start"} if existing else set())
    assert sorted(entries) == sorted(expected)
    assert document.content_hash == services.content_hash(document.content)
