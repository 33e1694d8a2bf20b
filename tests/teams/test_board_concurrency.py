"""The board under contention on PostgreSQL: 32 concurrent claimers on 1 000 pending tasks never
claim a task twice, and concurrent creates in one chat never share a number."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, connections

from apps.accounts import services as tenant_services
from apps.teams import board
from apps.teams import services as team_services
from apps.teams.board import BoardActor, BoardError
from apps.teams.models import Task, TaskEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

CLAIMERS = 32
TASKS = 1000
WINDOW = 48  # pending tasks a claimer looks at
ATTEMPTS = 6  # of which it tries to claim this many, in random order


@pytest.fixture
def wide_pool() -> Iterator[None]:
    """Room for every thread's connection at once, so the database, not the pool, sees 32 claimers."""
    options = connections.settings["default"]["OPTIONS"]
    pool = options.get("pool")
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's
    if isinstance(pool, dict):
        options["pool"] = {**pool, "max_size": CLAIMERS + 4}
    try:
        yield
    finally:
        connection.close()
        connection.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's
        if pool is not None:
            options["pool"] = pool


def run_threads(count: int, work: Callable[[int], None]) -> None:
    start = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]


def crew_of(tenant: Tenant, members: int):  # type: ignore[no-untyped-def]
    system = Actor.system(tenant)
    agents = [
        tenant_services.agent_create(actor=system, key=f"agent-{i:02d}", name=f"A{i}")
        for i in range(members + 1)
    ]
    team = team_services.team_create(actor=system, name="Swarm", lead=agents[0], members=agents[1:])
    return team, agents[0], agents[1:]


def test_concurrent_claimers_never_claim_a_task_twice(wide_pool, tenant_a):
    team, _, members = crew_of(tenant_a, CLAIMERS)
    Task.objects.bulk_create(
        [
            Task(
                tenant=tenant_a,
                team=team,
                subject=f"task {n}",
                number=n,
                identifier=f"T-{n:03d}-b{n % 1000:03d}",
                chat_id="bulk",
            )
            for n in range(1, TASKS + 1)
        ]
    )
    won: list[list[str]] = [[] for _ in range(CLAIMERS)]
    refused = Counter[str]()
    lock = threading.Lock()

    def claimer(index: int) -> None:
        agent = members[index]
        chooser = random.Random(index)
        while True:
            # As agents do: look at the board, then claim; everyone looks at the same first tasks.
            window = list(
                Task.objects.for_tenant(tenant_a)
                .filter(team=team, status=Task.Status.PENDING, owner__isnull=True)
                .order_by("number")
                .values_list("pk", flat=True)[:WINDOW]
            )
            connections.close_all()
            if not window:
                return
            for task_id in chooser.sample(window, min(ATTEMPTS, len(window))):
                try:
                    board.claim(team, task_id, agent=agent, actor=BoardActor.of_agent(agent))
                except BoardError as exc:
                    with lock:
                        refused[exc.message.split(":")[0]] += 1
                else:
                    won[index].append(str(task_id))
                finally:
                    connections.close_all()

    run_threads(CLAIMERS, claimer)

    claims = [task for mine in won for task in mine]
    assert len(claims) == len(set(claims)) == TASKS, "a task was claimed twice or not at all"
    assert refused["cannot claim"] > 0, "no two claimers ever met on a task"
    assert set(refused) == {"cannot claim"}
    rows = Task.objects.for_tenant(tenant_a).filter(team=team)
    assert rows.filter(status=Task.Status.IN_PROGRESS, owner__isnull=False).count() == TASKS
    owners = {str(pk): owner for pk, owner in rows.values_list("pk", "owner_id")}
    for index, mine in enumerate(won):
        assert all(owners[task] == members[index].pk for task in mine)
    assert TaskEvent.objects.for_tenant(tenant_a).filter(event_type="claimed").count() == TASKS
    assert sum(1 for mine in won if mine) > CLAIMERS // 2, "the claims were not spread over the claimers"


def test_concurrent_creates_in_one_chat_never_share_a_number(wide_pool, tenant_a):
    team, lead, _ = crew_of(tenant_a, 2)
    per_thread = 4

    def creator(index: int) -> None:
        for n in range(per_thread):
            board.create_task(team, actor=BoardActor.of_agent(lead), subject=f"{index}-{n}", chat_id="room")

    run_threads(CLAIMERS, creator)

    numbers = list(
        Task.objects.for_tenant(tenant_a).filter(team=team, chat_id="room").values_list("number", flat=True)
    )
    assert sorted(numbers) == list(range(1, CLAIMERS * per_thread + 1))
