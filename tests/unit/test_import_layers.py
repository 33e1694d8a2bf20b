"""The apps' layering (issue 19), checked by import-linter with the contracts in pyproject.toml: the check
passes, and the lists of existing violations it ignores only ever shrink."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

# How many imports each contract ignores today. When you remove an entry from a contract's
# ignore_imports in pyproject.toml, lower its number here to the new length: never raise it.
MAX_IGNORED = {
    "layers": 1,
    "acyclic-apps": 1,
}


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


def test_ignored_imports_only_shrink() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    ignored = {contract["id"]: contract.get("ignore_imports", []) for contract in contracts}
    assert set(ignored) == set(MAX_IGNORED), "every contract needs its MAX_IGNORED entry"
    for contract_id, imports in ignored.items():
        assert len(imports) == len(set(imports)), f"{contract_id}: duplicated ignore_imports"
        assert len(imports) <= MAX_IGNORED[contract_id], (
            f"{contract_id} ignores {len(imports)} imports, more than {MAX_IGNORED[contract_id]}: "
            "fix the new import instead of adding it to ignore_imports (issue 19)"
        )
        assert len(imports) == MAX_IGNORED[contract_id], (
            f"{contract_id} now ignores {len(imports)} imports: lower MAX_IGNORED[{contract_id!r}] "
            f"in {Path(__file__).name} from {MAX_IGNORED[contract_id]} to {len(imports)}"
        )
