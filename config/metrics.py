"""The metrics directory shared by Toolgate's processes (prometheus-client's multiprocess mode).

Every process (daphne, the django-q2 cluster and its workers, management commands) writes its metrics
into files under one directory; ``/metrics`` adds them up. Whatever starts the processes empties the
directory first, so that counters of an earlier run do not linger (Prometheus sees a counter reset,
as after any restart)::

    from config.metrics import prepare_multiprocess_dir
    prepare_multiprocess_dir()  # before the first child process starts

and may report a child that exited with :func:`process_exited` (the scrape also drops the live gauges
of processes that no longer exist). Neither imports Django; the settings compute the same directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from config import embedded_db


def multiprocess_dir() -> Path:
    """``PROMETHEUS_MULTIPROC_DIR``, or ``<TOOLGATE_DATA_DIR>/metrics`` (as the settings choose it)."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    return Path(configured) if configured else embedded_db.data_dir() / "metrics"


def prepare_multiprocess_dir() -> Path:
    """Create the directory, remove the metric files of earlier runs and export the variable to the
    children this process starts. Call it once, before starting them."""
    path = multiprocess_dir()
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink(missing_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


def process_exited(pid: int) -> None:
    """Drop the live gauges (websocket connections, pool use) of a child that exited."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(multiprocess_dir()))  # type: ignore[no-untyped-call]


def remove_files_of_ended_processes() -> int:
    """Remove the metric files of processes that no longer run (their counters go too); those of
    running processes stay. For a test session's end, where another session may still be running."""
    removed = 0
    for file in multiprocess_dir().glob("*_*.db"):
        try:
            pid = int(file.stem.rsplit("_", 1)[1])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            file.unlink(missing_ok=True)
            removed += 1
        except PermissionError:
            pass
    return removed
