"""Appends from concurrent calls (several agent loops of one user, or of one predefined agent's
HEARTBEAT.md) all land: the row is locked while it is extended, and a first copy made by two calls at
once is created once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.context_files import services
from apps.context_files.models import AgentContextFile, UserContextFile
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from tests.context_files.support import make_agent

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 4
LINES = 8


def run_together(work) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def worker(index: int) -> None:
        try:
            start.wait()
            for line in range(LINES):
                work(index, line)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_concurrent_appends_to_a_users_copy_all_land(tenant_a):
    agent = make_agent(tenant_a, "opener", Agent.Type.OPEN)
    actor = Actor.system(tenant_a)

    run_together(
        lambda index, line: services.user_file_save(
            actor=actor, agent=agent, user_id="ann", name="USER.md", content=f"{index}-{line}\n", append=True
        )
    )

    rows = UserContextFile.objects.for_tenant(tenant_a).filter(user_id="ann", name="USER.md")
    assert rows.count() == 1
    lines = rows.get().content.splitlines()
    assert lines[0] == "opener USER.md"  # the first copy started from the template, once
    assert sorted(lines[1:]) == sorted(f"{i}-{n}" for i in range(WRITERS) for n in range(LINES))


def test_concurrent_appends_to_the_agents_text_all_land(tenant_a):
    agent = make_agent(tenant_a, "fixed", Agent.Type.PREDEFINED, templates=False)
    actor = Actor.system(tenant_a)

    run_together(
        lambda index, line: services.agent_file_save(
            actor=actor, agent=agent, name="HEARTBEAT.md", content=f"{index}-{line}\n", append=True
        )
    )

    row = AgentContextFile.objects.for_tenant(tenant_a).get(name="HEARTBEAT.md")
    assert len(row.content.splitlines()) == WRITERS * LINES
