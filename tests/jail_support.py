"""Helpers for tests whose programs live outside the system's directories."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Where tests write programs for the processes they start (daphne, qcluster): the test session lists it
# in TOOLGATE_JAIL_RO_PATHS (tests/conftest.py), one directory per test process.
JAIL_PROGRAMS = Path(tempfile.mkdtemp(prefix="toolgate-test-programs-"))


def programs_visible_in_jail(settings: Any, tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` bound read-only in the jail for this test (``TOOLGATE_JAIL_RO_PATHS``), as an
    operator lists a directory of installed programs; use it as a fixture."""
    settings.TOOLGATE_JAIL_RO_PATHS = [*settings.TOOLGATE_JAIL_RO_PATHS, str(tmp_path)]
    yield tmp_path
