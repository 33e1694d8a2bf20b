"""The channel layer's listener against the real PostgreSQL: losing its connection, catching up, sharing.

Each test runs one event loop (``asyncio.run``) with one or two layer instances built from the class,
as a daphne process builds its layer. Two instances in one loop stand for two daphne processes: each
has its own client prefix, pool, listener connection, claimed channels and (since the subclass keeps
them per instance) its own channel queues. Upstream keeps those queues in a module-global map, where
one instance stealing another's stored messages would only move them into the other's queue and go
unnoticed; so the tests that are about not stealing also look at the message table itself, which is
what another process would see.

Connections are killed server-side with ``pg_terminate_backend``, found by the listener's
``application_name`` (one per instance). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import httpx
import psycopg
import pytest
from channels_postgres.db import MESSAGE_TABLE
from django.db import connection
from psycopg import sql

from apps.realtime.layers import PostgresChannelLayer
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = pytest.mark.django_db(transaction=True)

BOUND = 10.0  # seconds: any single wait (receive, reconnect, shutdown)
BIG = "x" * 12_000  # base64 of it does not fit in a NOTIFY payload (8000 bytes): only the row id is sent
LOGGER = "apps.realtime.layers"


def make_layer() -> PostgresChannelLayer:
    """A layer as settings configure it (without relying on settings choosing this backend)."""
    return PostgresChannelLayer(DATABASE="default", expiry=60, PSYCOPG_OPTIONS={"min_size": 0, "max_size": 4})


async def query(layer: PostgresChannelLayer, statement: str, *params: Any) -> Any:
    """The first column of the first row of ``statement``, run on the layer's pool."""
    pool = await layer.django_db.get_db_pool(db_params=layer.db_params)
    async with pool.connection() as conn:
        cursor = await conn.execute(statement, params)
        row = await cursor.fetchone()
    assert row is not None
    return row[0]


async def kill_listener(layer: PostgresChannelLayer) -> int:
    """What a database restart or an idle kill does to the listener's connection."""
    statement = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s"
    return int(await query(layer, statement, layer.listener_application_name))


async def listener_connections(layer: PostgresChannelLayer) -> int:
    statement = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    return int(await query(layer, statement, layer.listener_application_name))


async def stored(layer: PostgresChannelLayer, channel: str) -> int:
    """How many unexpired messages of ``channel`` are in the table (what a catch-up could take)."""
    statement = sql.SQL("SELECT count(*) FROM {} WHERE channel = %s AND expire > now()").format(
        sql.Identifier(MESSAGE_TABLE)
    )
    pool = await layer.django_db.get_db_pool(db_params=layer.db_params)
    async with pool.connection() as conn:
        cursor = await conn.execute(statement, (channel,))
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def is_ready(layer: PostgresChannelLayer) -> bool:
    return layer.listener_task_is_running is not None and layer.listener_task_is_running.is_set()


async def wait_until(predicate: Callable[[], bool], what: str, timeout: float = BOUND) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)


async def receive(layer: PostgresChannelLayer, channel: str) -> dict[str, Any]:
    message: dict[str, Any] = await asyncio.wait_for(layer.receive(channel), BOUND)
    return message


async def waiting_receive(layer: PostgresChannelLayer, channel: str) -> asyncio.Task[dict[str, Any]]:
    """A ``receive()`` already waiting, as a consumer's is between events (a new ``receive()`` call
    would start a dead listener afresh and hide that it died)."""
    task = asyncio.create_task(receive(layer, channel))
    await asyncio.sleep(0.1)  # parked on the channel's queue
    assert not task.done()
    return task


async def start(layer: PostgresChannelLayer) -> str:
    """A channel of ``layer`` with its listener running: one message sent and received on it."""
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "test.start"})
    assert (await receive(layer, channel))["type"] == "test.start"
    assert is_ready(layer)
    return channel


def gate_reconnects(
    monkeypatch: pytest.MonkeyPatch, layer: PostgresChannelLayer, *, fail: bool
) -> tuple[asyncio.Event, list[float]]:
    """Hold the listener's next connection attempts until the returned event is set.

    With ``fail`` each held attempt fails at once (the database is still down: the listener backs off
    and retries), otherwise it waits for the event. Returns the event and the attempts' start times.
    """
    release = asyncio.Event()
    attempts: list[float] = []
    connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]] = layer._connect_listener

    async def gated() -> psycopg.AsyncConnection[Any]:
        attempts.append(time.monotonic())
        if not release.is_set():
            if fail:
                raise psycopg.OperationalError("test: the database is still down")
            await release.wait()
        return await connect()

    monkeypatch.setattr(layer, "_connect_listener", gated)
    return release, attempts


def layer_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


# --- a. a killed listener connection comes back ---------------------------------------------------------


def test_messages_sent_after_the_listener_connection_is_killed_arrive(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        layer = make_layer()
        try:
            channel = await start(layer)
            waiting = await waiting_receive(layer, channel)
            assert await kill_listener(layer) == 1

            await layer.send(channel, {"type": "test.after", "n": 1})
            assert (await waiting)["n"] == 1

            # Listening again (not only caught up): a message sent now arrives by NOTIFY, exactly once.
            await wait_until(lambda: is_ready(layer), "the listener to be ready again")
            assert await listener_connections(layer) == 1
            for n in (2, 3):
                await layer.send(channel, {"type": "test.after", "n": n})
                assert (await receive(layer, channel))["n"] == n
        finally:
            await layer.stop_listener()

    with caplog.at_level(logging.INFO, logger=LOGGER):
        asyncio.run(scenario())
    [warning] = layer_warnings(caplog)
    assert "lost its database connection" in warning


# --- b. what was sent while the listener was away is delivered after it reconnects ----------------------


def test_messages_sent_while_the_listener_is_down_are_caught_up_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        layer = make_layer()
        try:
            channel = await start(layer)
            await layer.send(channel, {"type": "test.before"})  # delivered by NOTIFY; its row stays
            assert (await receive(layer, channel))["type"] == "test.before"

            waiting = await waiting_receive(layer, channel)
            release, attempts = gate_reconnects(monkeypatch, layer, fail=True)
            assert await kill_listener(layer) == 1
            await wait_until(lambda: len(attempts) >= 3, "failed reconnect attempts")
            assert not is_ready(layer)
            await layer.send(channel, {"type": "test.down", "n": 1})
            await layer.send(channel, {"type": "test.down", "n": 2, "blob": BIG})
            assert await stored(layer, channel) >= 2
            assert not waiting.done()

            release.set()
            first, second = await waiting, await receive(layer, channel)
            assert (first["n"], second["n"]) == (1, 2)
            assert second["blob"] == BIG
            # Left: only "test.before", delivered inline by NOTIFY (its row stays until it expires). The
            # caught-up rows were taken ("test.start" was too, by the listener's first catch-up).
            assert await stored(layer, channel) == 1

            # Nothing was queued twice (not the message delivered before the outage, whose row the
            # catch-up saw, nor the caught-up ones): the next message is the next one received.
            await layer.send(channel, {"type": "test.next"})
            assert (await receive(layer, channel))["type"] == "test.next"

            # Backoff: each failed attempt waited at least twice as long as the one before (0.2 s, 0.4 s…).
            gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
            for n, gap in enumerate(gaps[:3]):
                assert gap >= 0.9 * layer.LISTEN_BACKOFF_MIN * 2**n, gaps
        finally:
            await layer.stop_listener()

    with caplog.at_level(logging.INFO, logger=LOGGER):
        asyncio.run(scenario())
    assert len(layer_warnings(caplog)) == 1  # one outage, one warning, however many attempts failed


# --- c. two processes: each gets its own channels, neither takes the other's stored messages -----------


def test_instances_receive_only_their_channels_and_never_take_others_stored_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        one, two = make_layer(), make_layer()
        assert one.client_prefix != two.client_prefix
        # A channel of a third daphne process that is not running a listener right now (restarting).
        elsewhere = f"specific.zzzzz!{uuid.uuid4().hex}"
        try:
            await one.send(elsewhere, {"type": "test.elsewhere"})
            await one.send(elsewhere, {"type": "test.elsewhere", "blob": BIG})

            channel_two = await start(two)
            waiting = await waiting_receive(two, channel_two)
            release, attempts = gate_reconnects(monkeypatch, two, fail=False)
            assert await kill_listener(two) == 1
            await wait_until(lambda: bool(attempts), "the second instance to try to reconnect")
            await one.send(channel_two, {"type": "test.for-two", "n": 1})
            await one.send(channel_two, {"type": "test.for-two", "n": 2, "blob": BIG})

            # The first instance starts (and catches up) while the second is away.
            channel_one = await start(one)
            assert await stored(one, channel_two) == 2
            assert await stored(one, elsewhere) == 2

            # The second reconnects and catches up: its own messages, in order, the big one intact.
            release.set()
            first, second = await waiting, await receive(two, channel_two)
            assert (first["n"], second["n"]) == (1, 2)
            assert second["blob"] == BIG
            assert await stored(two, elsewhere) == 2  # still there for the third process

            # Both listening: each instance gets exactly the messages of its own channels.
            for n in range(3):
                big = {"blob": BIG} if n == 1 else {}
                await two.send(channel_one, {"type": "test.for-one", "n": n, **big})
                await one.send(channel_two, {"type": "test.for-two", "n": n, **big})
            for n in range(3):
                assert (await receive(one, channel_one))["n"] == n
                assert (await receive(two, channel_two))["n"] == n
            with pytest.raises(AssertionError, match="Wrong client prefix"):
                await one.receive(channel_two)
            # Neither listener queued anything for a channel that is not its own. (Upstream ``send``
            # and ``receive`` create a queue for any channel they are given, so empty ones may exist.)
            for layer in (one, two):
                assert all(queue.empty() for name, queue in layer._queues.items() if not layer._owns(name))
        finally:
            await one.stop_listener()
            await two.stop_listener()

    asyncio.run(scenario())


# --- d. a clean shutdown is final ----------------------------------------------------------------------


def test_the_shutdown_notification_ends_the_listener_for_good(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        layer = make_layer()
        # A private NOTIFY channel: ``1:shutdown`` on the real one would stop every listener on this
        # database, a live daphne's included.
        layer.listen_channel = f"toolgate_test_{uuid.uuid4().hex}"
        try:
            ready, _ = layer._get_or_create_listener_task()
            await asyncio.wait_for(ready.wait(), BOUND)
            task = layer._listener_task
            assert task is not None
            assert await listener_connections(layer) == 1

            await query(layer, "SELECT pg_notify(%s, '1:shutdown')::text", layer.listen_channel)
            await asyncio.wait_for(asyncio.shield(task), BOUND)
            assert not is_ready(layer)
            await asyncio.sleep(4 * layer.LISTEN_BACKOFF_MIN)  # longer than a reconnect would take
            assert await listener_connections(layer) == 0
        finally:
            await layer.stop_listener()

    with caplog.at_level(logging.INFO, logger=LOGGER):
        asyncio.run(scenario())
    assert layer_warnings(caplog) == []


def test_stopping_the_listener_while_it_reconnects_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        layer = make_layer()
        try:
            await start(layer)
            _, attempts = gate_reconnects(monkeypatch, layer, fail=True)
            assert await kill_listener(layer) == 1
            await wait_until(lambda: bool(attempts), "a reconnect attempt")
            task = layer._listener_task
            assert task is not None

            await asyncio.wait_for(layer.stop_listener(), BOUND)
            assert task.done()
            tried = len(attempts)
            await asyncio.sleep(4 * layer.LISTEN_BACKOFF_MIN)
            assert len(attempts) == tried
            assert await listener_connections(layer) == 0
        finally:
            await layer.stop_listener()

    asyncio.run(scenario())


# --- end to end: a real daphne keeps delivering after its listener connection is killed -----------------


def kill_other_processes_listeners() -> int:
    """Kill the listener connections of every layer but this process's: the live daphne's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'toolgate-channels-listener-%%'"
            " AND application_name NOT LIKE %s",
            [f"toolgate-channels-listener-{os.getpid()}-%"],
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.live
def test_daphne_delivers_events_after_its_listener_connection_is_killed(
    live: LiveProcesses, tenant_a: Tenant
) -> None:
    base_url = live.daphne()
    key = factories.make_api_key(tenant_a, Role.ADMIN)
    with open_socket(live.ws_url, api_key=key) as sock:
        assert sock.recv()["type"] == "hello"
        sock.subscribe(["agents"])

        deadline = time.monotonic() + BOUND
        while (killed := kill_other_processes_listeners()) == 0:  # there once the socket receives
            assert time.monotonic() < deadline, "daphne's listener connection never appeared"
            time.sleep(0.1)
        assert killed == 1

        with httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        ) as client:
            created = client.post("/api/v1/agents/", json={"key": "after-kill", "name": "After kill"})
        assert created.status_code == 201, created.text
        sock.wait_for(partial(event_of, topic="agents", type="agent.created", key="after-kill"))
