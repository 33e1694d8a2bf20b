"""Fixtures shared by the live tests (real daphne / django-q2 processes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

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
