"""The tool rate limiter (SPEC A "Runtime, scrubbing, limits", B §7.2).

A sliding-window log per session key: a call is allowed when fewer than ``limit`` calls were allowed
for that key in the last hour, and then recorded; a refused call is not recorded. The limit is the
tenant policy's ``rate_limit_per_hour`` (default 150; 0: no limit), which the pipeline passes as resolved
by the policy engine. Calls without a session
key are not limited. Keys are prefixed by the tenant, so tenant A's session "s1" and tenant B's "s1"
are separate windows.

The windows are shared by every process (several daphne and django-q2 workers), and each check is one
atomic operation in the shared store, so two processes can never both take the last slot:

* PostgreSQL (the default): one ``INSERT … ON CONFLICT DO UPDATE`` statement per check on a row per key
  (``RateLimitWindow``). The conflicting row is locked and the update computed from its latest version,
  so concurrent checks of one key run one after the other; checks of different keys do not wait.
* Redis (when ``REDIS_URL`` is set, as for the cache): a sorted set per key, checked and updated by one
  Lua script (scripts run atomically), expiring one window after its last call.

Old entries are dropped on every check of their key. A key that is never used again is removed by
Redis' expiry, or in PostgreSQL by ``prune()``, which checks run now and then (``PRUNE_EVERY``).

Time is the caller's wall clock (``time.time()``), or ``now=`` in tests.

In PostgreSQL the windows are read and written on a connection of their own (one per thread, in
autocommit), never on the request's: a check commits at once and holds its row's lock only for its one
statement, whatever transaction the caller is in (a tenant-wide window locked to the end of a caller's
transaction would serialise every call of that tenant), and it is counted whether or not the caller's
work commits.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any

import psycopg
from django.conf import settings
from django.db import connections

from apps.policy.models import PolicyDocument, Scope

if TYPE_CHECKING:
    import redis

    from apps.tenants.models import Tenant

WINDOW_SECONDS = 3600.0
DEFAULT_LIMIT = 150
MESSAGE = "tool rate limit exceeded: %d actions/hour for key %s"

# How often (seconds, per process) a check also deletes the PostgreSQL windows nobody used for a whole
# window: frequent enough that the table stays about as large as the number of active sessions.
PRUNE_EVERY = 600.0

_TABLE = "runtime_ratelimitwindow"

# One statement: insert the key's first hits, or (row locked) drop the hits older than the window and
# append up to %(n)s more while the window has room. In the UPDATE, every expression reads the row as it
# was (w.*), locked; "granted" and "refused" record the outcome for RETURNING, which reads the new row.
_KEPT = "ARRAY(SELECT h FROM unnest(w.hits) AS h WHERE h > %(cutoff)s)"
_ROOM = f"GREATEST(0, LEAST(%(n)s, %(limit)s - cardinality({_KEPT})))"
_CHECK_SQL = f"""
INSERT INTO {_TABLE} AS w (key, hits, refused, granted, updated_at)
VALUES (
    %(key)s, array_fill(%(now)s::double precision, ARRAY[LEAST(%(n)s, %(limit)s)]), false,
    LEAST(%(n)s, %(limit)s), %(now)s
)
ON CONFLICT (key) DO UPDATE SET
    hits = {_KEPT} || array_fill(%(now)s::double precision, ARRAY[{_ROOM}]),
    granted = {_ROOM},
    refused = cardinality({_KEPT}) >= %(limit)s,
    updated_at = %(now)s
RETURNING granted, (SELECT min(h) FROM unnest(w.hits) AS h)
"""  # noqa: S608 (the only interpolations are the table name and fragments, constants)

_PRUNE_SQL = f"DELETE FROM {_TABLE} WHERE updated_at <= %s"  # noqa: S608

# KEYS[1]: the window; ARGV: now, cutoff, limit, expiry seconds, a unique member prefix, slots wanted.
# Returns {slots taken, the oldest hit's time}.
_CHECK_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local room = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[1])
local taken = math.max(0, math.min(tonumber(ARGV[6]), room))
for i = 1, taken do
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[5] .. ':' .. i)
end
if taken > 0 then
    redis.call('EXPIRE', KEYS[1], ARGV[4])
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {taken, oldest[2] or ARGV[1]}
"""

_prune_lock = threading.Lock()
_next_prune = 0.0


def limit_for(tenant: Tenant) -> int | None:
    """The tenant policy's calls per hour per session key, or None when not limited (0). One query:
    the pipeline passes the limit the policy engine resolved instead."""
    document = (
        PolicyDocument.objects.for_tenant(tenant)
        .filter(scope=Scope.TENANT)
        .values_list("document", flat=True)
        .first()
    )
    value: Any = (document or {}).get("rate_limit_per_hour", DEFAULT_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int):  # validated when saved; never fail a call
        value = DEFAULT_LIMIT
    return value if value > 0 else None


def check_rate_limit(
    *, tenant: Tenant, session_key: str, now: float | None = None, per_hour: int | None = None
) -> str | None:
    """Record a call of ``session_key`` in ``tenant`` and return None, or return the refusal message
    (the call is then not recorded). Without a session key or a limit, always None. ``per_hour``: the
    limit the policy resolved (0: none); without it, the tenant policy's (``limit_for``)."""
    if not session_key:
        return None
    limit = limit_for(tenant) if per_hour is None else (per_hour if per_hour > 0 else None)
    if limit is None:
        return None
    now = time.time() if now is None else now
    key = f"{tenant.pk}:{session_key}"
    allowed = _check_redis(key, limit, now) if settings.REDIS_URL else _check_postgres(key, limit, now)
    if allowed:
        return None
    return MESSAGE % (limit, session_key)


def window_count(*, key: str, window: float, now: float | None = None) -> int:
    """How many calls ``key`` has in its window now (read only; for showing usage)."""
    now = time.time() if now is None else now
    if settings.REDIS_URL:
        client, _ = _redis(settings.REDIS_URL)
        return int(client.zcount(f"toolgate:ratelimit:{key}", f"({now - window!r}", "+inf"))
    row = _run(
        f"SELECT cardinality(ARRAY(SELECT h FROM unnest(hits) AS h WHERE h > %s)) FROM {_TABLE} "  # noqa: S608
        "WHERE key = %s",
        [now - window, key],
    )
    return int(row[0]) if row else 0


_windows = threading.local()
# Every connection made, weakly: a thread's ends with it, and ``close_connections`` reaches them all.
_made: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
_made_lock = threading.Lock()


def _window_connection() -> psycopg.Connection[Any]:
    """This thread's autocommit connection to the database (made again after a fork or a failure)."""
    held: psycopg.Connection[Any] | None = getattr(_windows, "connection", None)
    if held is not None and not held.closed and getattr(_windows, "pid", None) == os.getpid():
        return held
    params = connections["default"].get_connection_params()
    made = psycopg.connect(**params, autocommit=True)
    _windows.connection, _windows.pid = made, os.getpid()
    with _made_lock:
        _made.add(made)
    return made


def close_connections() -> None:
    """Close every thread's windows connection of this process (before the database is dropped, as a
    test run ends; a thread that checks again later connects anew)."""
    with _made_lock:
        made = list(_made)
        _made.clear()
    for held in made:
        held.close()


def _run(statement: str, params: Any) -> tuple[Any, ...] | None:
    """One statement on the windows' connection; once more on a fresh connection if that one broke
    (a restarted database server)."""
    for attempt in (1, 2):
        try:
            with _window_connection().cursor() as cursor:
                cursor.execute(statement, params)
                return cursor.fetchone() if cursor.description else (cursor.rowcount,)
        except psycopg.OperationalError:
            held = getattr(_windows, "connection", None)
            if held is not None:
                held.close()
            if attempt == 2:
                raise
    return None


def _check_postgres(key: str, limit: int, now: float) -> bool:
    return _take_postgres(key, limit, now, WINDOW_SECONDS, 1)[0] > 0


def _take_postgres(key: str, limit: int, now: float, window: float, n: int) -> tuple[int, float]:
    """Take up to ``n`` slots: (slots taken, seconds until the oldest hit in the window leaves it)."""
    params: dict[str, str | float | int] = {
        "key": key,
        "now": now,
        "cutoff": now - window,
        "limit": limit,
        "n": n,
    }
    row = _run(_CHECK_SQL, params)
    assert row is not None  # INSERT … RETURNING always answers one row
    granted, oldest = row
    _maybe_prune(now)
    return int(granted), max(0.0, (oldest if oldest is not None else now) + window - now)


def take_slots(
    *, key: str, limit: int, window: float, n: int = 1, now: float | None = None
) -> tuple[int, float]:
    """Take up to ``n`` calls' slots at once in a sliding window of ``window`` seconds shared by every
    process, never more than leave ``limit`` in it: (slots taken, 0 or more; seconds until the oldest
    recorded call leaves the window, which is when a slot frees if none was taken). ``key`` must start
    with the tenant's id (``<tenant id>:…``) so tenants never share one, and so the tenant's deletion
    finds it."""
    now = time.time() if now is None else now
    if settings.REDIS_URL:
        return _take_redis(key, limit, now, window, n)
    return _take_postgres(key, limit, now, window, n)


def _maybe_prune(now: float) -> None:
    global _next_prune
    with _prune_lock:
        if time.monotonic() < _next_prune:
            return
        _next_prune = time.monotonic() + PRUNE_EVERY
    prune(now)


def prune(now: float | None = None) -> int:
    """Delete the PostgreSQL windows not checked for a whole window (all their hits have expired, so
    deleting one is the same as keeping it empty). Returns how many were deleted."""
    now = time.time() if now is None else now
    row = _run(_PRUNE_SQL, [now - WINDOW_SECONDS])
    return int(row[0]) if row else 0


@functools.cache
def _redis(url: str) -> tuple[redis.Redis, Any]:
    """One client (a thread-safe connection pool) and the registered script per process and URL."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return client, client.register_script(_CHECK_LUA)


def _check_redis(key: str, limit: int, now: float) -> bool:
    return _take_redis(key, limit, now, WINDOW_SECONDS, 1)[0] > 0


def _take_redis(key: str, limit: int, now: float, window: float, n: int) -> tuple[int, float]:
    _, script = _redis(settings.REDIS_URL)
    # The same hit time twice must be two entries: each member carries a unique suffix.
    member = f"{now!r}:{uuid.uuid4().hex}"
    expiry = math.ceil(window) + 1
    taken, oldest = script(
        keys=[f"toolgate:ratelimit:{key}"],
        args=[repr(now), repr(now - window), limit, expiry, member, n],
    )
    return int(taken), max(0.0, float(oldest) + window - now)
