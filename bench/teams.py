"""The task board under load: claims per second under contention, and how fast board events reach 100
websocket subscribers.

* claims: N threads (16, then 32), each a member agent with its own database connection, claim from
  one shared pool of unassigned pending tasks through ``apps.teams.board.claim`` — as agents do, each
  looks at the first pending tasks of the board and tries a few of them in random order, so claimers
  meet on the same tasks. Reported: claims/s, refused attempts (someone else was first), and a check
  that no task was claimed twice.
* delivery: a daphne process (``bench.http_execute.start_daphne``) serves 100 sockets subscribed to one
  team's ``team:<id>`` topic; this process creates tasks at a steady rate through the board, and every
  socket timestamps the ``task.created`` events it receives. Latency is receive time minus the event's
  own timestamp (taken when it was published, inside the transaction, so the commit is included):
  p50/p99/max over every delivery (goal p99 < 250 ms), and lost events (published, never received).

Part of ``python -m bench`` (the delivery part is left out with ``--skip-http``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.teams.models import Team
    from apps.tenants.models import Agent, Tenant

CLAIMER_COUNTS = (16, 32)
TASKS_PER_RUN = 1500
WINDOW = 48  # pending tasks a claimer looks at
ATTEMPTS = 6  # of which it tries this many, in random order
SUBSCRIBERS = 100
CHANGES_PER_SECOND = 20
DELIVERY_GOAL_P99_MS = 250.0
DRAIN_SECONDS = 5.0


@dataclass(frozen=True)
class ClaimResult:
    claimers: int
    claims: int
    refused: int
    seconds: float
    double_claims: int

    @property
    def per_second(self) -> float:
        return self.claims / self.seconds


def _swarm(tenant: Tenant, members: int) -> tuple[Team, list[Agent]]:
    from apps.accounts import services as tenant_services
    from apps.teams import services as team_services
    from apps.teams.models import Team
    from apps.tenants.actors import Actor

    system = Actor.system(tenant)
    agents = [
        tenant_services.agent_create(actor=system, key=f"claimer-{i:02d}", name=f"Claimer {i}")
        for i in range(members + 1)
    ]
    team = team_services.team_create(actor=system, name="Claimers", lead=agents[0], members=agents[1:])
    return Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=team.pk), agents[1:]


def _fill(team: Team, run: int, count: int) -> None:
    """``count`` unassigned pending tasks in a chat of their own (bulk: what is measured is the claim)."""
    from apps.teams.models import Task

    Task.objects.bulk_create(
        [
            Task(
                tenant=team.tenant,
                team=team,
                subject=f"bench task {run}-{n}",
                number=n,
                identifier=f"T-{n:03d}-{run:x}{n % 4096:03x}"[:20],
                chat_id=f"claims-{run}",
            )
            for n in range(1, count + 1)
        ],
        batch_size=500,
    )


def _claim_run(team: Team, members: list[Agent], claimers: int, run: int) -> ClaimResult:
    from django.db import connections

    from apps.teams import board
    from apps.teams.board import BoardActor, BoardError
    from apps.teams.models import Task, TaskEvent

    chat = f"claims-{run}"
    _fill(team, run, TASKS_PER_RUN)
    pending = Task.objects.for_tenant(team.tenant).filter(
        team_id=team.pk, chat_id=chat, status=Task.Status.PENDING, owner__isnull=True
    )
    won: list[list[Any]] = [[] for _ in range(claimers)]
    refused = Counter[int]()
    lock = threading.Lock()
    start = threading.Barrier(claimers + 1)
    errors: list[BaseException] = []

    def claimer(index: int) -> None:
        agent, actor = members[index], BoardActor.of_agent(members[index])
        chooser = random.Random(index)  # noqa: S311 (spreads claimers, not security)
        try:
            start.wait()
            while True:
                window = list(pending.order_by("number").values_list("pk", flat=True)[:WINDOW])
                if not window:
                    return
                for task_id in chooser.sample(window, min(ATTEMPTS, len(window))):
                    try:
                        board.claim(team, task_id, agent=agent, actor=actor)
                    except BoardError:
                        with lock:
                            refused[index] += 1
                    else:
                        won[index].append(task_id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"a claimer failed: {errors[0]!r}")
    claims = [task for mine in won for task in mine]
    events = Counter(
        TaskEvent.objects.for_tenant(team.tenant)
        .filter(team_id=team.pk, event_type="claimed", task__chat_id=chat)
        .values_list("task_id", flat=True)
    )
    double = (len(claims) - len(set(claims))) + sum(1 for n in events.values() if n > 1)
    return ClaimResult(claimers, len(claims), sum(refused.values()), seconds, double)


def claims(tenant: Tenant) -> list[str]:
    """Run the claim measurement for every claimer count and return the report lines."""
    from django.db import connection, connections

    team, members = _swarm(tenant, max(CLAIMER_COUNTS))
    # Room for every thread's connection at once, so the database, not the pool, sees the claimers.
    options = connections.settings["default"]["OPTIONS"]
    pool = options.get("pool")
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's
    if isinstance(pool, dict):
        options["pool"] = {**pool, "max_size": max(CLAIMER_COUNTS) + 4}
    try:
        results = [_claim_run(team, members, n, run) for run, n in enumerate(CLAIMER_COUNTS, start=1)]
    finally:
        connection.close()
        connection.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's
        if pool is not None:
            options["pool"] = pool
    lines = [
        f"Task claims under contention: {TASKS_PER_RUN} unassigned pending tasks per run; each claimer looks "
        f"at the first {WINDOW} and tries {ATTEMPTS} of them in random order (apps.teams.board.claim: one "
        "conditional UPDATE, the task event, the live event):",
        "",
        "| claimers | claims | seconds | claims/s | refused attempts | double claims |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.claimers} | {r.claims} | {r.seconds:.2f} | {r.per_second:,.0f} | {r.refused} "
            f"| {r.double_claims} |"
        )
    return lines


# --- delivery latency -------------------------------------------------------------------------------------


async def _subscriber(
    url: str, api_key: str, topic: str, ready: asyncio.Event, stop: asyncio.Event, sink: dict[str, float]
) -> None:
    from websockets.asyncio.client import connect

    async with connect(url, additional_headers={"Authorization": f"Bearer {api_key}"}, open_timeout=30) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        await ws.send(json.dumps({"type": "subscribe", "topics": [topic]}))
        reply = json.loads(await ws.recv())
        assert reply["type"] == "subscribed", reply
        ready.set()
        while not stop.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            received = time.time()
            message = json.loads(raw)
            event = message.get("event") or {}
            if message.get("type") == "event" and event.get("type") == "task.created":
                sink[event["data"]["id"]] = received - dt.datetime.fromisoformat(event["ts"]).timestamp()


def _publish(team: Team, seconds: float) -> list[str]:
    """Create tasks at a steady rate for ``seconds``; returns their ids."""
    from django.db import connections

    from apps.teams import board
    from apps.teams.board import BoardActor

    actor = BoardActor.system("bench")
    published: list[str] = []
    interval = 1.0 / CHANGES_PER_SECOND
    began = time.perf_counter()
    try:
        for n in range(int(seconds * CHANGES_PER_SECOND)):
            delay = began + n * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            task = board.create_task(team, actor=actor, subject=f"delivery {n}", chat_id="delivery")
            published.append(str(task.pk))
    finally:
        connections.close_all()
    return published


async def _listen_all(ws_url: str, api_key: str, topic: str, conn: Connection) -> None:
    """Open every socket, say "ready", then collect until told to stop; send back what each received."""
    stop = asyncio.Event()
    sinks: list[dict[str, float]] = [{} for _ in range(SUBSCRIBERS)]
    readies = [asyncio.Event() for _ in range(SUBSCRIBERS)]
    sockets = [
        asyncio.create_task(_subscriber(ws_url, api_key, topic, readies[i], stop, sinks[i]))
        for i in range(SUBSCRIBERS)
    ]
    try:
        try:
            await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), timeout=60)
        except TimeoutError:
            failed = [s.exception() for s in sockets if s.done() and s.exception() is not None]
            conn.send(("failed", f"not every subscriber was ready within 60 s: {failed[:1]!r}"))
            return
        conn.send(("ready", None))
        published: list[str] = await asyncio.to_thread(conn.recv)
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline and any(len(sink) < len(published) for sink in sinks):
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*sockets, return_exceptions=True)
    conn.send(("done", sinks))


def _subscribers_process(ws_url: str, api_key: str, topic: str, conn: Connection) -> None:
    """The sockets live in a process of their own, as browsers would: their reading does not compete
    with the publisher for this process's interpreter."""
    asyncio.run(_listen_all(ws_url, api_key, topic, conn))


def _deliver(
    ws_url: str, api_key: str, team: Team, seconds: float
) -> tuple[list[str], list[dict[str, float]]]:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(
        target=_subscribers_process, args=(ws_url, api_key, f"team:{team.pk}", theirs), daemon=True
    )
    process.start()
    try:
        if not ours.poll(90):
            raise RuntimeError("the subscribers did not connect within 90 s")
        state, detail = ours.recv()
        if state != "ready":
            raise RuntimeError(detail)
        published = _publish(team, seconds)
        ours.send(published)
        if not ours.poll(DRAIN_SECONDS + 30):
            raise RuntimeError("the subscribers did not report")
        state, sinks = ours.recv()
        if state != "done":
            raise RuntimeError(sinks)
    finally:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
    return published, sinks


def delivery(tenant: Tenant, *, api_key: str, db_name: str, seconds: float) -> list[str]:
    """Measure publish-to-receive latency at 100 sockets over one daphne and return the report lines."""
    from apps.accounts import services as tenant_services
    from apps.teams import services as team_services
    from apps.teams.models import Team
    from apps.tenants.actors import Actor
    from bench.http_execute import start_daphne, stop_daphne

    system = Actor.system(tenant)
    lead, member = (
        tenant_services.agent_create(actor=system, key=f"delivery-{role}", name=role)
        for role in ("lead", "member")
    )
    created = team_services.team_create(actor=system, name="Delivery", lead=lead, members=[member])
    team = Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=created.pk)
    process, base = start_daphne(db_name)
    try:
        ws_url = base.replace("http://", "ws://") + "/ws/events/"
        published, sinks = _deliver(ws_url, api_key, team, seconds)
    finally:
        stop_daphne(process)
    wanted = set(published)
    latencies = sorted(ms * 1000 for sink in sinks for task, ms in sink.items() if task in wanted)
    expected = len(published) * SUBSCRIBERS
    lost = expected - len(latencies)
    if not latencies:
        return [f"Event delivery: none of {expected} deliveries arrived — FAILS"]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    verdict = "meets" if p99 < DELIVERY_GOAL_P99_MS and lost == 0 else "misses"
    return [
        f"Event delivery to {SUBSCRIBERS} websocket subscribers of one team's topic over one daphne: "
        f"{len(published)} task changes at {CHANGES_PER_SECOND}/s, {expected} deliveries expected:",
        f"  publish-to-receive latency p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms, "
        f"max {latencies[-1]:.1f} ms; lost {lost} — {verdict} the goal "
        f"(p99 < {DELIVERY_GOAL_P99_MS:g} ms, none lost)",
    ]


def run(*, tenant: Tenant, api_key: str, db_name: str, seconds: float, http: bool = True) -> list[str]:
    """Both measurements' report lines (delivery only with ``http``)."""
    lines = claims(tenant)
    if http:
        lines += ["", *delivery(tenant, api_key=api_key, db_name=db_name, seconds=seconds)]
    return lines
