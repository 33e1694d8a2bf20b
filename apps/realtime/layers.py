"""The PostgreSQL channel layer (``channels_postgres``), made safe for every process that uses it.

Upstream ``channels_postgres`` 1.1.x has three defects that bite a deployment where a django-q2 worker
publishes and daphne delivers; this subclass fixes them and changes nothing else (same tables, trigger,
message format and NOTIFY protocol, so it interoperates with the stock layer):

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

It also claims a process-local channel before sending to it (so a send-then-receive in one process
is not lost), stores a group message with one ``INSERT … SELECT`` instead of a read and a write, and stays
quiet (instead of logging a warning per event) when a group has no subscriber, the normal case.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
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
    """``channels_postgres`` with per-event-loop pools and working ``group_discard`` (see module doc).

    Configure with ``"DATABASE": "<django alias>"`` (default ``"default"``) instead of copying
    connection settings; ``PSYCOPG_OPTIONS``, ``prefix``, ``expiry``, ``group_expiry`` and
    ``symmetric_encryption_keys`` are passed through unchanged.
    """

    def __init__(self, DATABASE: str = "default", **config: Any) -> None:
        database = connections[DATABASE].settings_dict
        connection = {key: database[key] for key in _CONNECTION_KEYS if key in database}
        connection.setdefault("OPTIONS", {})
        super().__init__(**connection, **config)
        self.django_db = LoopLocalDatabaseLayer(config.get("PSYCOPG_OPTIONS", {}), self.db_params)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Send to one channel; a channel of this process is claimed before the message is stored.

        Upstream's listener drops the NOTIFY of a channel nobody in this process has called
        ``receive()`` on yet, and never reads that row again: a send-then-receive in one process
        (the ``/readyz`` channel-layer check) then waits forever, intermittently. A channel named with
        our client prefix can only be received here, so claiming it at send time is safe.
        """
        if "!" in channel and self.non_local_name(channel).endswith(self.client_prefix + "!"):
            await self._get_or_create_channel_advisory_lock(channel)
        await super().send(channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel of ``group`` with one ``INSERT … SELECT``."""
        assert self.require_valid_group_name(group), "Group name not valid"
        await self.django_db.send_to_channel(self._group_key(group), self.serialize(message), self.expiry)
