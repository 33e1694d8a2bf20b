"""Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against a server URL.

The suite and the Node 22 it needs are pinned in tests/conformance/package.json and installed by
scripts/conformance-deps.sh into .tools/conformance/. The CLI writes one ``checks.json`` per scenario under
its output directory (``server-<scenario>-<timestamp>/``); a scenario is ``failed`` when one of its checks
failed, ``warning`` when none failed but one warned, ``passed`` otherwise.

``python -m tests.conformance.runner URL [--spec-version V]`` prints the table for each version.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".tools" / "conformance"
NODE = INSTALL / "node_modules" / "node" / "bin" / "node"
PACKAGE = INSTALL / "node_modules" / "@modelcontextprotocol" / "conformance"
CLI = PACKAGE / "dist" / "index.js"
DEPS_SCRIPT = ROOT / "scripts" / "conformance-deps.sh"
# The suite's reference server, made with the SDK: stdio by default, ``--http PORT`` for streamable HTTP.
REFERENCE_SERVER = ROOT / "tests" / "mcp" / "servers" / "conformance.py"

# ``server-<scenario>-2026-11-28T13-39-20-397Z``
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_LISTED = re.compile(r"^\s+- (?P<name>\S+)(?: \[(?P<versions>[^\]]*)\])?$")


def available() -> bool:
    return NODE.is_file() and CLI.is_file()


def suite_version() -> str:
    return str(json.loads((PACKAGE / "package.json").read_text())["version"])


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(CLI), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )


def server_scenarios(timeout: float = 60) -> dict[str, list[str]]:
    """Every server scenario of the suite (pending ones included) and the protocol versions it is for."""
    listed = _cli("list", "--server", timeout=timeout)
    if listed.returncode != 0:
        raise RuntimeError(f"conformance list failed: {listed.stderr.strip()[-2000:]}")
    scenarios: dict[str, list[str]] = {}
    for line in listed.stdout.splitlines():
        match = _LISTED.match(line)
        if match:
            versions = match["versions"] or ""
            scenarios[match["name"]] = [v for v in versions.split(",") if v]
    return scenarios


def spec_versions(scenarios: dict[str, list[str]]) -> list[str]:
    """The protocol versions the server scenarios are tagged with, oldest first."""
    return sorted({version for versions in scenarios.values() for version in versions})


@dataclass
class Run:
    url: str
    spec_version: str | None
    seconds: float
    exit_code: int
    results: dict[str, str] = field(default_factory=dict)  # scenario -> passed | failed | warning
    messages: dict[str, list[str]] = field(default_factory=dict)  # scenario -> failure / warning messages
    checks: dict[str, list[dict[str, object]]] = field(default_factory=dict)  # scenario -> the suite's checks
    output: str = ""

    def failing(self) -> dict[str, str]:
        return {name: status for name, status in self.results.items() if status != "passed"}


def _status(checks: list[dict[str, object]]) -> str:
    statuses = {str(check.get("status")) for check in checks}
    if "FAILURE" in statuses:
        return "failed"
    if "WARNING" in statuses:
        return "warning"
    return "passed"


def _messages(checks: list[dict[str, object]]) -> list[str]:
    return [
        f"{check.get('status')} {check.get('id')}: {check.get('errorMessage') or ''}".strip()
        for check in checks
        if check.get("status") in {"FAILURE", "WARNING"}
    ]


def run_server(
    url: str,
    *,
    spec_version: str | None = None,
    scenario: str | None = None,
    expected: list[str] | None = None,
    timeout: float = 600,
) -> Run:
    """Run the server scenarios (all of them, pending included, or ``scenario``) against ``url``.

    ``expected`` names the scenarios the run should have produced; one without a result (the CLI crashed or
    timed out before it) is counted ``failed``.
    """
    args = ["server", "--url", url]
    args += ["--scenario", scenario] if scenario else ["--suite", "all"]
    if spec_version:
        args += ["--spec-version", spec_version]
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as out:
        started = time.monotonic()
        try:
            done = _cli(*args, "--output-dir", out, timeout=timeout)
            exit_code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as error:
            partial = b"".join(
                part if isinstance(part, bytes) else part.encode()
                for part in (error.stdout, error.stderr)
                if part
            )
            exit_code, output = -1, f"timed out after {timeout}s\n{partial.decode(errors='replace')}"
        run = Run(url, spec_version, time.monotonic() - started, exit_code, output=output)
        for directory in sorted(Path(out).iterdir()):
            match = _RESULT_DIR.match(directory.name)
            checks_file = directory / "checks.json"
            if not match or not checks_file.is_file():
                continue
            checks = json.loads(checks_file.read_text())
            run.results[match["scenario"]] = _status(checks)
            run.messages[match["scenario"]] = _messages(checks)
            run.checks[match["scenario"]] = checks
    for name in expected or []:
        if name not in run.results:
            run.results[name] = "failed"
            run.messages[name] = ["no result: the CLI did not run the scenario"]
    return run


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the MCP conformance suite's server scenarios.")
    parser.add_argument("url")
    parser.add_argument("--spec-version", action="append", help="a protocol version (default: each one)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if not available():
        raise SystemExit(f"The conformance suite is not installed: run {DEPS_SCRIPT}")
    scenarios = server_scenarios()
    versions = args.spec_version or spec_versions(scenarios)
    runs = {}
    for version in versions:
        expected = [name for name, tagged in scenarios.items() if version in tagged]
        runs[version] = run_server(args.url, spec_version=version, expected=expected)
    if args.json:
        _say(
            json.dumps(
                {
                    v: {"seconds": r.seconds, "results": r.results, "messages": r.messages}
                    for v, r in runs.items()
                },
                indent=2,
            )
        )
        return
    _say(f"@modelcontextprotocol/conformance {suite_version()} against {args.url}")
    for version, run in runs.items():
        _say(f"\n{version}: {len(run.results)} scenarios in {run.seconds:.1f}s (exit {run.exit_code})")
        for name, status in run.results.items():
            detail = "; ".join(run.messages.get(name, []))
            _say(f"  {status:8} {name}{'  ' + detail if detail and status != 'passed' else ''}")


if __name__ == "__main__":
    main()
