"""Fixtures shared by the live tests (real daphne / django-q2 processes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.llm.fake_provider import PUBLIC_IP, FakeProvider
from tests.local_http import serving
from tests.processes import LiveProcesses


@pytest.fixture
def daphne(live: LiveProcesses) -> str:
    """The base URL of the session's daphne process (started on first use)."""
    return live.daphne()


@pytest.fixture
def sockets() -> Iterator[contextlib.ExitStack]:
    """Holds the sockets a test opens and closes them, whatever the outcome."""
    with contextlib.ExitStack() as stack:
        yield stack


@contextlib.contextmanager
def cluster_with_provider(
    live: LiveProcesses, *, label: str, **env: str
) -> Iterator[tuple[LiveProcesses, FakeProvider]]:
    """Processes (started on demand) allowed to reach the scripted provider on 127.0.0.2, with ``env``
    added, and the provider. The session's own cluster (``live``) is stopped first: it would take the
    runs' jobs without that permission."""
    from django.db import connection

    live.stop_qcluster()
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"],
        extra_env={"TOOLGATE_SSRF_ALLOW_NETS": f"{PUBLIC_IP}/32", **env},
        label=label,
    )
    try:
        with serving(PUBLIC_IP) as server:
            yield processes, FakeProvider(server).install()
    finally:
        processes.stop_all()


@pytest.fixture
def provider_processes(live: LiveProcesses) -> Iterator[tuple[LiveProcesses, FakeProvider]]:
    """A django-q2 cluster allowed to reach the scripted provider, and the provider."""
    with cluster_with_provider(live, label="runs-") as started:
        yield started
