"""Django's PostgreSQL backend whose connection pool fails fast while the server is unreachable.

Django's pool waits up to ``DATABASE_POOL_TIMEOUT`` for a connection, which is right when the pool is
busy and wrong when the server is gone: every request would hang that long. Here a request waits at most
``FIRST_WAIT`` seconds; if no connection came, one direct connection attempt tells a busy pool (wait on
for the rest of the timeout) from an unreachable server (:class:`~apps.tenants.database.DatabaseUnavailable`
at once, answered with 503). While the server is known to be down, requests fail at once, and one of
them tries the server again at most every ``PROBE_INTERVAL`` seconds; the first that reaches it lets
every request through again.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool, PoolTimeout

from apps.tenants import database

FIRST_WAIT = 1.0


class GuardedPool(ConnectionPool):
    def getconn(self, timeout: float | None = None) -> Any:
        total = self.timeout if timeout is None else timeout
        kwargs = self.kwargs if isinstance(self.kwargs, dict) else {}
        database.refuse_while_down(kwargs)
        try:
            return super().getconn(timeout=min(FIRST_WAIT, total))
        except PoolTimeout:
            if total <= FIRST_WAIT or not database.reachable(kwargs):
                raise
            return super().getconn(timeout=total - FIRST_WAIT)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and type(pool) is ConnectionPool:
            pool.__class__ = GuardedPool  # the same pool, with the guarded getconn
        return pool

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        try:
            return super().get_new_connection(conn_params)
        except PoolTimeout as error:
            if database.is_down():
                raise database.DatabaseUnavailable(database.MESSAGE) from error
            raise
