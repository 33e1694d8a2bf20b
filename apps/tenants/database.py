"""Whether the database server can be reached, as this process last saw it.

The PostgreSQL backend (``apps.tenants.postgresql``) marks the server down when a connection attempt
fails, and from then on refuses requests at once with :class:`DatabaseUnavailable`, trying the server
again itself at most every ``PROBE_INTERVAL`` seconds, so that nothing waits on a server that is gone.
The API and the dashboard answer that error (and any other lost connection) with 503
(``apps.tenants.middleware``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
from django.db import OperationalError

logger = logging.getLogger(__name__)

PROBE_INTERVAL = 0.5
PROBE_TIMEOUT = 1
MESSAGE = "The database is unavailable; try again in a few seconds."

_lock = threading.Lock()
_down_since: float | None = None
_last_probe = 0.0


class DatabaseUnavailable(OperationalError):
    """The database server cannot be reached now."""


def is_down() -> bool:
    return _down_since is not None


def _mark(down: bool) -> None:
    global _down_since
    if down and _down_since is None:
        _down_since = time.monotonic()
        logger.error("database unreachable: requests are refused with 503 until it is back")
    elif not down and _down_since is not None:
        logger.warning("database reachable again after %.1fs", time.monotonic() - _down_since)
        _down_since = None


def reachable(kwargs: dict[str, Any]) -> bool:
    """One direct connection attempt (bounded by ``PROBE_TIMEOUT``); records the outcome."""
    global _last_probe
    _last_probe = time.monotonic()
    try:
        psycopg.connect(**{**kwargs, "connect_timeout": PROBE_TIMEOUT}).close()
    except psycopg.OperationalError:
        _mark(down=True)
        return False
    _mark(down=False)
    return True


def refuse_while_down(kwargs: dict[str, Any]) -> None:
    """Raise :class:`DatabaseUnavailable` while the server is known to be down, unless this request is
    the one whose turn it is to try it again and finds it back."""
    if _down_since is None:
        return
    if time.monotonic() - _last_probe >= PROBE_INTERVAL and _lock.acquire(blocking=False):
        try:
            if reachable(kwargs):
                return
        finally:
            _lock.release()
    raise DatabaseUnavailable(MESSAGE)
