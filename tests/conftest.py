"""Shared fixtures: tenants A and B, persona clients (owner/admin/member/viewer of A, an outsider from B),
and real daphne / django-q2 processes for end-to-end tests."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from config import embedded_db, metrics
from tests import factories
from tests.jail_support import JAIL_PROGRAMS
from tests.processes import LiveProcesses, stop_every_cluster

# The tests' own MCP servers (tests/mcp/servers, made with the SDK) and the programs tests write for
# processes they start (JAIL_PROGRAMS) are programs an operator would install: the jail shows their
# directories read-only, here and in the processes the tests start.
TEST_PROGRAMS = str(Path(__file__).resolve().parent / "mcp" / "servers")
os.environ["TOOLGATE_JAIL_RO_PATHS"] = f"{TEST_PROGRAMS},{JAIL_PROGRAMS}"
settings.TOOLGATE_JAIL_RO_PATHS = [TEST_PROGRAMS, str(JAIL_PROGRAMS)]


# Seconds each test file took in a recent full run (``TOOLGATE_RECORD_FILE_SECONDS=path`` writes them).
# The suite runs a file per worker at a time (``--dist loadfile``) and hands files out in collection
# order, so the longest go first: a long file started last keeps one worker busy while the other idles.
FILE_SECONDS = Path(__file__).resolve().parent / "file_seconds.json"
_seconds_by_file: defaultdict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    try:
        seconds: dict[str, float] = json.loads(FILE_SECONDS.read_text())
    except (OSError, ValueError):
        return
    # A file not measured yet is taken as an average one; the sort is stable, so a file's tests keep
    # their order and files of equal weight keep the collection's.
    typical = sorted(seconds.values())[len(seconds) // 2] if seconds else 0.0
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], typical))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("TOOLGATE_RECORD_FILE_SECONDS"):
        _seconds_by_file[report.nodeid.split("::", 1)[0]] += report.duration


def _record_file_seconds(config: pytest.Config) -> None:
    target = os.environ.get("TOOLGATE_RECORD_FILE_SECONDS")
    # Under xdist the controller sees every worker's reports; a worker writes nothing.
    if not target or hasattr(config, "workerinput") or not _seconds_by_file:
        return
    ordered = dict(sorted(((f, round(s, 1)) for f, s in _seconds_by_file.items()), key=lambda fs: -fs[1]))
    Path(target).write_text(json.dumps(ordered, indent=1) + "\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # In CI nothing may be skipped: a missing dependency is installed by `make test` or the run fails.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"} and skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _record_file_seconds(session.config)
    # The metric files of this run's processes, ended by now, go with it.
    metrics.remove_files_of_ended_processes()
    # The embedded server started for this run is stopped with it; one that was already running stays.
    if settings.EMBEDDED_DATABASE and embedded_db.started_here:
        from django.db import connections

        connections.close_all()
        embedded_db.stop()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # Figures a test records with ``record_property("summary", line)`` (the API fuzz run's coverage),
    # printed where CI's log keeps them; under xdist the reports carry them back from the workers.
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", []):
                if name == "summary" and getattr(report, "when", "call") == "call":
                    terminalreporter.write_line(str(value))


@pytest.fixture(autouse=True, scope="session")
def _rate_windows_closed_before_the_database_goes(django_db_setup: None) -> Iterator[None]:
    """The rate limiter keeps connections of its own (apps/runtime/ratelimit.py): closed before the test
    database is dropped, which a connection still open would refuse."""
    yield
    from apps.runtime import ratelimit

    ratelimit.close_connections()


@pytest.fixture
def registered_schedules(db: None) -> None:
    """The recurring jobs as a freshly migrated database has them (``apps.toolkit.schedules``). A
    transactional test empties every table when it ends, these rows included; tests about the schedules
    apply the (idempotent) registry again first."""
    from apps.toolkit import schedules

    schedules.apply()


@pytest.fixture
def tenant_a(db: None) -> Tenant:
    return factories.make_tenant("tenant-a")


@pytest.fixture
def tenant_b(db: None) -> Tenant:
    return factories.make_tenant("tenant-b")


@pytest.fixture
def owner_a(tenant_a: Tenant) -> APIClient:
    return factories.key_client(factories.make_api_key(tenant_a, Role.OWNER))


@pytest.fixture
def admin_a(tenant_a: Tenant) -> APIClient:
    return factories.key_client(factories.make_api_key(tenant_a, Role.ADMIN))


@pytest.fixture
def member_a(tenant_a: Tenant) -> APIClient:
    return factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))


@pytest.fixture
def viewer_a(tenant_a: Tenant) -> APIClient:
    return factories.key_client(factories.make_api_key(tenant_a, Role.VIEWER))


@pytest.fixture
def outsider(tenant_b: Tenant) -> APIClient:
    """The owner of tenant B: every role, but in the other tenant."""
    return factories.key_client(factories.make_api_key(tenant_b, Role.OWNER))


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture(scope="session")
def live(django_db_setup: None) -> Iterator[LiveProcesses]:
    """Real daphne and qcluster processes on the test database (tests/processes.py).

    Use it from transactional tests: the processes only see committed rows."""
    from django.db import connection

    processes = LiveProcesses(db_name=connection.settings_dict["NAME"])
    yield processes
    processes.stop_all()


@pytest.fixture(autouse=True)
def _no_warm_jail_left_to_other_tests() -> Iterator[None]:
    """The warm jails a test's commands left (apps/toolkit/warm_jails.py) end with it: a later test that
    counts the jails or processes on this host sees only its own."""
    yield
    from apps.toolkit import warm_jails

    warm_jails.close_all()


@pytest.fixture(autouse=True, scope="module")
def _no_cluster_left_to_other_modules() -> Iterator[None]:
    """The session's cluster is stopped when a module that used it ends (the next ``qcluster()`` starts
    a new one): left idle, it would take the jobs that a later transactional test enqueues and runs by
    hand, and run them a second time."""
    yield
    stop_every_cluster()
