"""The PostgreSQL channel layer (``channels_postgres``), made safe for every process that uses it.

Upstream ``channels_postgres`` 1.1.x has defects that bite a deployment where a django-q2 worker
publishes and several daphne processes deliver; this subclass fixes them and changes nothing else (same
tables, trigger, message format and NOTIFY protocol, so it interoperates with the stock layer):

1. **One connection pool per process, bound to the first event loop.** ``channels_postgres.db`` keeps a
   module-global psycopg ``AsyncConnectionPool``. Its maintenance tasks (the workers that open
   replacement connections) live on the event loop that first used it. Sync code publishes through
   ``async_to_sync``, which in a process without a running loop (a django-q2 worker, a management
   command, the test runner) runs every call in a *new* loop and shuts it down afterwards, cancelling
   those tasks. The pool then works only while its first connection survives: once the server closes
   it (restart, idle timeout, failover) the pool can never open another one, and every later publish
   of that worker waits 30 s for a connection and fails with ``PoolTimeout``: its events are lost for
   good. Here each event loop gets its own pool, closed when that loop shuts down.
2. **``group_discard`` needs a database alias that does not exist.** Upstream deletes the membership
   through the ORM on ``using("channels_postgres")``, an alias Toolgate does not (and should not)
   define, so every unsubscribe and disconnect raised ``ConnectionDoesNotExist``: the unsubscribe
   request failed, memberships of closed sockets stayed forever (every later event was stored once per
   dead socket) and the expired-message cleanup scheduled after the delete never ran. Here it runs on
   the layer's own pool, like every other query.
3. **Connection settings frozen at import.** Settings copied the database name into the layer's
   config, so a process whose Django connection points elsewhere (pytest's ``test_`` database) published
   into the wrong database. Here the layer takes its connection settings from a Django database alias
   when it is built (on first use, after the test runner has switched databases).
4. **The listener never reconnects.** Each receiving process has one task that LISTENs on one
   connection and routes the NOTIFYs to channel queues. When that connection dropped (database
   restart, idle kill, network failure) the task died and the process never delivered another event.
   Here it is supervised: a lost connection is logged once, ``receive()`` waits while there is none,
   and it reconnects with exponential backoff (0.2 s doubling to 5 s), LISTENs, catches up on what was
   stored meanwhile and is ready again; a silent (half-open) connection is found by a heartbeat query.
   Only cancellation (``stop_listener()``) or the upstream ``1:shutdown`` notification end it. Upstream
   also started a second listener for every ``receive()`` arriving before the first was ready (each
   one queueing every event again); here there is one per instance and event loop.
5. **The catch-up steals other processes' messages.** At listener start upstream deletes and queues
   every unexpired message of every channel, including channels of other daphne processes: their
   events were lost, and for a message too big for NOTIFY (which carries only the row id) their
   receiver failed an ``assert`` on the missing row. Here only the channels this instance created and
   claimed are caught up, messages already queued (delivered inline by NOTIFY; those rows stay until
   they expire) are not queued again, and a big message's id whose row is gone is skipped instead of
   killing the consumer. Channel queues are per instance, not module-global.
6. **Advisory locks as channel ownership.** Upstream claims every channel with a session-level
   advisory lock taken on a pooled connection, which lasts only as long as that connection (pool
   recycling, server restarts) and holds a slot of the server's shared lock table per channel ever
   received on. Channels made by ``new_channel()`` are unique to their instance, so they are claimed
   locally only (see ``_get_or_create_channel_advisory_lock``).

It also claims a process-local channel before sending to it (so a send-then-receive in one process
is not lost), stores a group message with one ``INSERT … SELECT`` instead of a read and a write, and stays
quiet (instead of logging a warning per event) when a group has no subscriber, the normal case.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import time
import weakref
from collections import deque
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import psycopg
from channels_postgres.core import PostgresChannelLayer as UpstreamPostgresChannelLayer
from channels_postgres.db import GROUP_CHANNEL_TABLE, MESSAGE_TABLE, DatabaseLayer, utc_now
from django.db import connections
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger(__name__)

_CONNECTION_KEYS = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS", "TIME_ZONE")


class LoopLocalDatabaseLayer(DatabaseLayer):  # type: ignore[misc]
    """The upstream query helpers, with one connection pool per running event loop."""

    def __init__(self, psycopg_options: dict[str, Any], db_params: dict[str, Any]) -> None:
        super().__init__(psycopg_options, db_params, logger=logger)
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool] = {}
        self._closers: set[asyncio.Task[None]] = set()

    async def get_db_pool(self, db_params: dict[str, Any]) -> AsyncConnectionPool:
        """The pool of the running event loop, created (and tied to the loop's lifetime) on first use."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is not None:
            return pool
        # Loops closed without cancelling their tasks leave their pool behind; the garbage collector
        # closes those connections once the pool is no longer referenced.
        for stale in [other for other in self._pools if other.is_closed()]:
            del self._pools[stale]
        self._closers = {task for task in self._closers if not task.get_loop().is_closed()}
        # Named per process, so that pg_stat_activity tells whose layer connections these are.
        params = {"application_name": f"toolgate-channels-{os.getpid()}", **db_params}
        opened: weakref.WeakSet[psycopg.AsyncConnection[Any]] = weakref.WeakSet()

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.set_autocommit(True)  # as upstream: every INSERT commits (and NOTIFYs) at once
            opened.add(conn)

        pool = AsyncConnectionPool(
            conninfo=psycopg.conninfo.make_conninfo(conninfo="", **params),
            open=False,
            configure=configure,
            name=f"channels-postgres-{id(loop):x}",
            **self.psycopg_options,
        )
        self._pools[loop] = pool
        # Not waiting for the first connection: a caller needing one waits (bounded by the pool's
        # timeout), and a failed start is retried by the pool instead of leaving a closed pool here.
        await pool.open(wait=False)
        closer = loop.create_task(self._close_with_loop(loop, pool, opened), name=f"{pool.name}-closer")
        self._closers.add(closer)  # the loop keeps only a weak reference to its tasks
        closer.add_done_callback(self._closers.discard)
        return pool

    async def _close_with_loop(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: AsyncConnectionPool,
        opened: weakref.WeakSet[psycopg.AsyncConnection[Any]],
    ) -> None:
        # asyncio.run() (which async_to_sync uses for its short-lived loops) cancels every pending task
        # before closing the loop: that is the moment to close this loop's connections.
        try:
            await loop.create_future()
        finally:
            if self._pools.get(loop) is pool:
                del self._pools[loop]
            # The pool's own workers are being cancelled in the same sweep, which makes pool.close()
            # stop with CancelledError (from gathering them) before it closes its idle connections:
            # close every connection this pool opened directly; close() still marks the pool closed.
            # (No timeout: with one, psycopg_pool leaves the gathering future's error unretrieved.)
            for conn in list(opened):
                await conn.close()
            with contextlib.suppress(asyncio.CancelledError):
                await pool.close(timeout=None)  # type: ignore[arg-type]

    async def send_to_channel(
        self, group_key: str, message: bytes, expire: int, channel: str | None = None
    ) -> None:
        """Store ``message`` for ``channel``, or for every member of ``group_key`` in one statement.

        The table's trigger NOTIFYs the listeners on commit (autocommit). A group without members
        stores nothing, silently: most events have no subscriber at the moment they happen.
        """
        expires = utc_now() + timedelta(seconds=expire)
        if channel is not None:
            query = sql.SQL("INSERT INTO {messages} (channel, message, expire) VALUES (%s, %s, %s)").format(
                messages=sql.Identifier(MESSAGE_TABLE)
            )
            params: tuple[Any, ...] = (channel, message, expires)
        else:
            query = sql.SQL(
                "INSERT INTO {messages} (channel, message, expire) "
                "SELECT DISTINCT channel, %s::bytea, %s::timestamptz FROM {groups} WHERE group_key = %s"
            ).format(messages=sql.Identifier(MESSAGE_TABLE), groups=sql.Identifier(GROUP_CHANNEL_TABLE))
            params = (message, expires, group_key)
        pool = await self.get_db_pool(db_params=self.db_params)
        async with pool.connection() as conn:
            await conn.execute(query, params)

    async def delete_channel_group(self, group_key: str, channel: str) -> None:
        """Remove ``channel`` from the group (on the layer's pool, not through an ORM alias)."""
        query = sql.SQL("DELETE FROM {groups} WHERE group_key = %s AND channel = %s").format(
            groups=sql.Identifier(GROUP_CHANNEL_TABLE)
        )
        pool = await self.get_db_pool(db_params=self.db_params)
        async with pool.connection() as conn:
            await conn.execute(query, (group_key, channel))


class PostgresChannelLayer(UpstreamPostgresChannelLayer):  # type: ignore[misc]
    """``channels_postgres`` with per-event-loop pools and a reconnecting listener (see module doc).

    Configure with ``"DATABASE": "<django alias>"`` (default ``"default"``) instead of copying
    connection settings; ``PSYCOPG_OPTIONS``, ``prefix``, ``expiry``, ``group_expiry`` and
    ``symmetric_encryption_keys`` are passed through unchanged.
    """

    LISTEN_BACKOFF_MIN = 0.2  # seconds before the first reconnect attempt, doubled after each failure
    LISTEN_BACKOFF_MAX = 5.0
    LISTEN_HEARTBEAT = 30.0  # seconds without a notification before the listener checks its connection
    LISTEN_HEARTBEAT_TIMEOUT = 10.0
    SEEN_MARGIN = 60.0  # seconds a big message's id is remembered beyond the expiry (other clocks)

    def __init__(self, DATABASE: str = "default", **config: Any) -> None:
        database = connections[DATABASE].settings_dict
        connection = {key: database[key] for key in _CONNECTION_KEYS if key in database}
        connection.setdefault("OPTIONS", {})
        super().__init__(**connection, **config)
        self.database_alias = DATABASE
        self.django_db = LoopLocalDatabaseLayer(config.get("PSYCOPG_OPTIONS", {}), self.db_params)
        self._queues: dict[str, asyncio.Queue[str]] = {}
        self._listener_task: asyncio.Task[None] | None = None
        # Ids of messages already queued here, with when a catch-up can no longer return them.
        self._seen_ids: set[int] = set()
        self._seen_order: deque[tuple[float, int]] = deque()
        self.listen_channel = "channels_postgres_messages"  # the trigger's NOTIFY channel
        # Per instance, so that pg_stat_activity (and an operator, or a test) can find each listener.
        self.listener_application_name = f"toolgate-channels-listener-{os.getpid()}-{self.client_prefix}"

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Send to one channel; a channel of this process is claimed before the message is stored.

        Upstream's listener drops the NOTIFY of a channel nobody in this process has called
        ``receive()`` on yet, and never reads that row again: a send-then-receive in one process
        (the ``/readyz`` channel-layer check) then waits forever, intermittently. A channel named with
        our client prefix can only be received here, so claiming it at send time is safe.
        """
        if self._owns(channel):
            await self._get_or_create_channel_advisory_lock(channel)
        await super().send(channel, message)

    def group_send_in_transaction(self, group: str, message: dict[str, Any]) -> None:
        """Store a group message on Django's own connection, inside the caller's transaction.

        For sync code (views, services, django-q2 jobs). The row and the NOTIFY its trigger raises
        become visible only when that transaction commits, and vanish with a rollback, which is exactly
        "published after commit", with no event loop, connection pool or extra connection per call
        (``async_to_sync(group_send)`` from sync code costs a new loop and a new connection each time).
        """
        query, params = self.group_send_statement(group, message)
        with connections[self.database_alias].cursor() as cursor:
            cursor.execute(query, params)

    def group_send_statement(self, group: str, message: dict[str, Any]) -> tuple[str, list[Any]]:
        """The ``INSERT … SELECT`` (and its parameters) that stores ``message`` for every channel of
        ``group``, for :meth:`group_send_in_transaction` or to be run as part of another statement (a
        record and its live event in one round trip, ``apps.realtime.events.write_and_publish``)."""
        assert self.require_valid_group_name(group), "Group name not valid"
        query = (
            f'INSERT INTO "{MESSAGE_TABLE}" (channel, message, expire) '  # noqa: S608 (constant table names)
            "SELECT DISTINCT channel, %s::bytea, %s::timestamptz "
            f'FROM "{GROUP_CHANNEL_TABLE}" WHERE group_key = %s'
        )
        expires = utc_now() + timedelta(seconds=self.expiry)
        return query, [self.serialize(message), expires, self._group_key(group)]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel of ``group`` with one ``INSERT … SELECT``."""
        assert self.require_valid_group_name(group), "Group name not valid"
        await self.django_db.send_to_channel(self._group_key(group), self.serialize(message), self.expiry)

    # --- the listener: supervised, reconnecting, catching up only on this instance's channels ------------

    def _owns(self, channel: str) -> bool:
        """Whether ``channel`` is a process-specific channel made by this instance's ``new_channel()``."""
        return "!" in channel and self.non_local_name(channel).endswith(self.client_prefix + "!")

    def release_channel(self, channel: str) -> None:
        """Forget a channel of this process whose consumer has gone (its socket closed).

        Without it, every websocket ever served would leave its queue and its claim behind for the
        life of the daphne process, and every catch-up would send the whole, ever-growing list of
        claimed channels to the server. Later messages for the channel are then ignored, like those of
        any channel that is not ours."""
        self._queues.pop(channel, None)
        self._channel_advisory_locks.pop(channel, None)

    def _get_or_create_queue(self, channel: str) -> asyncio.Queue[str]:
        """This instance's queue for ``channel`` (upstream keeps one module-global map for all instances)."""
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = asyncio.Queue()
        return queue

    async def _get_or_create_channel_advisory_lock(self, channel: str) -> bool:
        """Claim ``channel`` for this process: locally for our own channels, by advisory lock otherwise.

        Upstream takes a session-level ``pg_try_advisory_lock`` on whichever pooled connection it
        borrows and hands that connection back to the pool. The lock therefore does not survive the
        connection: the pool closes it after ``max_lifetime`` (1 h by default), the server drops it on a
        restart or idle kill, and the lock goes with it, while the local ``_channel_advisory_locks`` entry
        (the only thing the listener looks at) still says "claimed". For our own channels that does not
        matter, because the lock has nothing to exclude: the name carries this instance's client prefix
        and a fresh uuid4, no other process ever creates it, and upstream ``receive()`` refuses a channel
        of another client prefix. Taking it anyway only costs a query per channel and holds one entry
        of the server's *shared* lock table (sized by ``max_locks_per_transaction`` for the whole server)
        per websocket ever opened, until the pooled connection happens to be recycled. So our own
        channels are claimed locally only. A general channel (no ``!``, receivable by any process)
        keeps upstream's lock; Toolgate receives on none, and for such a channel the lock is only as
        durable as the pooled connection it was taken on.
        """
        if self._owns(channel):
            self._channel_advisory_locks[channel] = True
            return True
        claimed: bool = await super()._get_or_create_channel_advisory_lock(channel)
        return claimed

    def _get_or_create_listener_task(self) -> tuple[asyncio.Event, bool]:
        """Start the listener task of the running loop unless it runs already; never asks the caller to.

        Upstream returns "new" whenever the ready event is not set and leaves starting the task to its
        caller. During the listener's start (connect, catch-up) and, with a reconnecting listener,
        during every outage, each ``receive()`` would start one more listener, and every extra listener
        queues every event once more. Here the one task is kept (a strong reference: the loop keeps
        only weak ones) and ``receive()`` just waits for its ready event.
        """
        loop = asyncio.get_running_loop()
        task = self._listener_task
        if task is None or task.done() or task.get_loop() is not loop:
            ready = asyncio.Event()  # an Event belongs to the loop it is first awaited on
            self.event_loop = loop
            self.listener_task_is_running = ready
            task = loop.create_task(self._listen(ready), name=f"channel-layer-listener-{self.client_prefix}")
            task.add_done_callback(self._listener_done)
            self._listener_task = task
        assert self.listener_task_is_running is not None
        return self.listener_task_is_running, False

    @staticmethod
    def _listener_done(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # retrieved here, or asyncio complains
            logger.error("Channel layer listener failed", exc_info=task.exception())

    async def listen_to_all_channels(self) -> None:
        """Upstream's entry point: run the supervised listener in the current task."""
        ready = self.listener_task_is_running or asyncio.Event()
        self.listener_task_is_running = ready
        await self._listen(ready)

    async def stop_listener(self) -> None:
        """Stop this instance's listener (a clean shutdown: it does not reconnect) and wait for it."""
        task, self._listener_task = self._listener_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _connect_listener(self) -> psycopg.AsyncConnection[Any]:
        """A new autocommit connection for LISTEN, named so that pg_stat_activity tells it apart."""
        # A bounded connect (unless the alias sets its own): a reconnect during a network failure
        # must fail and back off, not hang in the kernel's SYN retries for minutes.
        params = {"connect_timeout": 10, **self.db_params, "application_name": self.listener_application_name}
        conninfo = psycopg.conninfo.make_conninfo(conninfo="", **params)
        return await psycopg.AsyncConnection.connect(conninfo=conninfo, autocommit=True)

    async def _listen(self, ready: asyncio.Event) -> None:
        """LISTEN and route notifications to the channel queues, reconnecting until shut down.

        ``ready`` is set while a connection listens (``receive()`` waits for it) and cleared while
        there is none. Only cancellation or the upstream ``1:shutdown`` payload end the loop; any other
        failure is a lost connection: it is logged once per outage, then the loop reconnects with
        exponential backoff (``LISTEN_BACKOFF_MIN`` doubling up to ``LISTEN_BACKOFF_MAX``).
        """
        backoff = self.LISTEN_BACKOFF_MIN
        lost_since: float | None = None
        try:
            while True:
                try:
                    conn = await self._connect_listener()
                    try:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.listen_channel)))
                        # After LISTEN, so that nothing stored meanwhile falls between the two: what
                        # the catch-up takes and is also notified is dropped by _route as already seen.
                        await self._catch_up(conn)
                        ready.set()
                        backoff = self.LISTEN_BACKOFF_MIN
                        if lost_since is not None:
                            outage = time.monotonic() - lost_since
                            logger.info("Channel layer listener reconnected after %.1f s", outage)
                            lost_since = None
                        if await self._dispatch(conn):
                            logger.debug("Channel layer listener shut down")
                            return
                    finally:
                        # Not the connection's context manager: its exit rolls back first, which on a
                        # half-open connection waits for an answer that never comes. close() does not.
                        await conn.close()
                except Exception as exc:  # any failure of the connection: reconnect (cancellation is not one)
                    ready.clear()
                    if lost_since is None:
                        lost_since = time.monotonic()
                        logger.warning(
                            "Channel layer listener lost its database connection (%s: %s); reconnecting",
                            type(exc).__name__,
                            " ".join(str(exc).split()) or "no detail",  # libpq's are multi-line
                        )
                    else:
                        logger.debug("Channel layer listener reconnect failed: %s", exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.LISTEN_BACKOFF_MAX)
        finally:
            ready.clear()

    async def _dispatch(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Route notifications until the connection fails (raises) or a shutdown arrives (True).

        A connection that silently stops answering (a half-open TCP connection after a network
        failure) never raises by itself: after ``LISTEN_HEARTBEAT`` seconds without a notification a
        ``SELECT 1`` has to answer within ``LISTEN_HEARTBEAT_TIMEOUT`` seconds. Notifications that
        arrive meanwhile wait in psycopg's backlog for the next ``notifies()``.
        """
        while True:
            async for notify in conn.notifies(timeout=self.LISTEN_HEARTBEAT):
                if notify.payload == "1:shutdown":
                    return True
                self._route(notify.payload)
            await asyncio.wait_for(conn.execute("SELECT 1"), self.LISTEN_HEARTBEAT_TIMEOUT)

    def _route(self, payload: str) -> None:
        """Queue a notification for one of our claimed channels, once.

        The payload is ``id:channel:base64:expire`` or, for a message too big for NOTIFY, ``id:channel``
        (the receiver then fetches the row). Notifications of channels not claimed here belong to other
        processes (or other instances) and are dropped, as upstream does.
        """
        parts = payload.split(":")
        try:
            message_id, channel = int(parts[0]), parts[1]
            # Rows of inline messages stay until they expire; rows of big ones until the receiver
            # deletes them (at the latest when they expire: with our expiry, plus a margin for another
            # process's clock). Remembering the id that long keeps a catch-up from queueing it again.
            forget_at = float(parts[3]) if len(parts) == 4 else time.time() + self.expiry + self.SEEN_MARGIN
            if len(parts) not in (2, 4):
                raise ValueError(len(parts))
        except (IndexError, ValueError):  # not from the trigger; not worth dropping the connection for
            logger.warning("Channel layer listener ignored a malformed notification: %.80r", payload)
            return
        if not self._channel_advisory_locks.get(channel, False) or message_id in self._seen_ids:
            return
        self._remember(message_id, forget_at)
        self._get_or_create_queue(channel).put_nowait(payload)

    def _remember(self, message_id: int, forget_at: float) -> None:
        """Mark ``message_id`` as queued, and forget ids whose rows a catch-up can no longer return."""
        now = time.time()
        # Roughly in forget_at order (a fixed expiry after sending): prune from the oldest until one is
        # still needed; a few out of order stay a little longer, which is harmless.
        while self._seen_order and self._seen_order[0][0] < now:
            self._seen_ids.discard(self._seen_order.popleft()[1])
        self._seen_ids.add(message_id)
        self._seen_order.append((forget_at, message_id))

    async def _catch_up(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Queue the stored, unexpired messages of our claimed channels that were not queued yet.

        Upstream takes *every* unexpired message of *every* channel here, and so steals the messages
        of other processes' channels (whose big messages then fail their receiver's ``assert``). Only
        channels this instance created and claimed are taken, and ids already queued (delivered by
        NOTIFY before a reconnect; inline rows stay in the table until they expire) are left alone.
        Taken rows are deleted, as upstream does, and delivered inline.
        """
        channels = [channel for channel, claimed in self._channel_advisory_locks.items() if claimed]
        channels = [channel for channel in channels if self._owns(channel)]
        if not channels:
            return
        query = sql.SQL(
            "DELETE FROM {messages} WHERE id IN ("
            " SELECT id FROM {messages}"
            " WHERE channel = ANY(%s::text[]) AND expire > %s AND NOT (id = ANY(%s::bigint[]))"
            " FOR UPDATE SKIP LOCKED"
            ") RETURNING id, channel, message, extract(epoch FROM expire)::text"
        ).format(messages=sql.Identifier(MESSAGE_TABLE))
        cursor = await conn.execute(query, (channels, utc_now(), list(self._seen_ids)))
        rows: Iterable[tuple[int, str, bytes, str]] = await cursor.fetchall()
        # RETURNING has no order; ids follow insertion order, which is the order a channel's sender used.
        for message_id, channel, message, expire in sorted(rows):
            self._remember(message_id, float(expire))
            encoded = base64.b64encode(message).decode("ascii")
            self._get_or_create_queue(channel).put_nowait(f"{message_id}:{channel}:{encoded}:{expire}")

    async def _get_message_from_channel(self, channel: str, queue: asyncio.Queue[str]) -> dict[str, Any]:
        """The next unexpired message of ``channel`` from its queue (upstream's, minus one assert).

        A big message's notification carries only its id; when its row is gone by the time it is read
        (taken by a catch-up that queued it again inline, or swept after expiring) upstream fails an
        ``assert`` and kills the receiving consumer. Here that notification is skipped.
        """
        while True:
            payload = await queue.get()
            parts = payload.split(":")
            if len(parts) == 4:
                _, _, encoded, expire = parts
                if float(expire) < time.time():
                    continue
                message: dict[str, Any] = self.deserialize(base64.b64decode(encoded))
                return message
            row = await self.django_db.delete_message_returning_message(int(parts[0]))
            if row is None:
                logger.debug("Message %s of %s was already taken or expired", parts[0], channel)
                continue
            message = self.deserialize(row[0])
            return message
