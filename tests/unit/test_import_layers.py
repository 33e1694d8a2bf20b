"""The apps' layering (issue 19), checked by import-linter with the contracts in pyproject.toml: the check
passes, and no contract ignores any import (a new violation is fixed, never listed as an exception)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-logo",
            "--no-cache",
            str(PYPROJECT),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_contract_ignores_an_import() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    assert {contract["id"] for contract in contracts} == {"layers", "acyclic-apps"}
    for contract in contracts:
        assert not contract.get("ignore_imports"), (
            f"{contract['id']} ignores {contract['ignore_imports']}: move the code to the layer it belongs "
            "to, or invert the dependency (docs/architecture.md), instead of listing an exception"
        )
