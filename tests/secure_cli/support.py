"""Fake CLIs for the credentialed-exec tests: small shell scripts that leave a marker in their HOME
(the workspace) when they run and print their arguments and environment, credentials included, so a
test can prove the credentials are scrubbed from everything a call returns."""

from __future__ import annotations

import os
from pathlib import Path

# Long and random-looking enough to be registered with the scrubber, and matched by no pattern alone.
TOKEN = "tok3n-binary-Zq81xw"
GRANT_TOKEN = "tok3n-grant-Kp20dvYt"
USER_TOKEN = "tok3n-user-Mv77cqRsLa"

SCRIPT = """#!/bin/sh
: > "$HOME/ran-{name}"
echo "argc=$#"
for a in "$@"; do echo "arg=[$a]"; done
echo "value: $GH_TOKEN"
echo "token length ${{#GH_TOKEN}}"
echo "user: $USER"
echo "home: $HOME"
env | sed 's/=.*//' | sort | sed 's/^/env:/'
{extra}
"""


def fake_cli(directory: Path, name: str = "gh", *, extra: str = "") -> Path:
    """An executable script ``directory/name`` (see the module docstring); ``extra`` shell lines run
    last (``exit 3``, ``sleep 30`` …)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(SCRIPT.format(name=name, extra=extra))
    path.chmod(0o755)
    return path


def ran(workspace: Path, name: str = "gh") -> bool:
    """Whether the fake ``name`` ran in ``workspace`` (its marker exists)."""
    return os.path.exists(workspace / f"ran-{name}")
