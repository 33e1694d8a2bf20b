"""The throwaway ``toolgate_bench`` database: created empty before a run, dropped after it.

It lives on the same server as the developer's ``toolgate`` database (the embedded one, or
``DATABASE_URL``'s), but the harness only ever creates, migrates and drops *this* name, so the
developer's data is never read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

BENCH_DB = "toolgate_bench"


def admin_connection(settings_dict: dict[str, Any]) -> psycopg.Connection[Any]:
    """An autocommit connection to the ``postgres`` database of ``settings_dict``'s server (also the
    tests' view of the server's sessions, ``tests.processes``)."""
    # CREATE/DROP DATABASE cannot run inside the database concerned, nor in a transaction.
    return psycopg.connect(
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        user=settings_dict["USER"] or None,
        password=settings_dict["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )


def _checked_name(settings_dict: dict[str, Any]) -> str:
    # The one safety net that matters: never drop a database other than the bench's own.
    name = str(settings_dict["NAME"])
    if name != BENCH_DB:
        raise RuntimeError(f"refusing to touch database {name!r}: the bench only uses {BENCH_DB!r}")
    return name


def recreate(settings_dict: dict[str, Any]) -> None:
    """Drop whatever a crashed earlier run left behind and create an empty bench database."""
    name = sql.Identifier(_checked_name(settings_dict))
    with admin_connection(settings_dict) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def drop(settings_dict: dict[str, Any]) -> None:
    """Drop the bench database; FORCE ends connections still held (e.g. a channel-layer pool)."""
    name = sql.Identifier(_checked_name(settings_dict))
    with admin_connection(settings_dict) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def with_bench_tenant(work: Callable[[Any], list[str]]) -> int:
    """Run ``work(tenant)`` on a fresh, migrated bench database with one tenant ``bench``, print the
    lines it returns, and drop the database (and stop the embedded server if this run started it)."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from apps.accounts import services
    from config import embedded_db

    settings_dict = connections["default"].settings_dict
    try:
        recreate(settings_dict)
        call_command("migrate", verbosity=0, interactive=False)
        call_command("createcachetable", verbosity=0)
        lines = work(services.tenant_create(slug="bench", name="Bench"))
    finally:
        connections.close_all()
        drop(settings_dict)
        if settings.EMBEDDED_DATABASE and embedded_db.started_here:
            embedded_db.stop()
    print("\n".join(lines))
    return 0


def standalone(main: Callable[[], int]) -> None:
    """Run one bench module's ``main`` as ``python -m bench`` runs them: only the throwaway bench
    database is ever touched."""
    import os
    import sys

    os.environ["TOOLGATE_DB_NAME"] = BENCH_DB
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    sys.exit(main())
