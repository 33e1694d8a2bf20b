"""Read config/settings.py in a fresh Python process with a given environment (settings are read once
per process, so every variant needs its own): the tests of settings that depend on the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]


def probe_settings(
    script: str, *argv: str, unset: Iterable[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (which sets Django up and prints what it reads) with this environment, less the
    variables in ``unset``, plus ``env``; never starts the embedded database."""
    dropped = set(unset)
    environment = {
        **{name: value for name, value in os.environ.items() if name not in dropped},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "TOOLGATE_EMBEDDED_DB_AUTOSTART": "0",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
