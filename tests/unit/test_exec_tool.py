"""The exec tool with real processes: output, exit codes, process-group timeouts, output caps, a clean
environment, the working directory, and the safeguard that no setting switches off.

Every test runs twice: in the jail (the default) and on the host (mode host, as an installation that
allows it runs it), which share the runner's timeouts, caps and clean-up."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import psutil
import pytest

from apps.accounts import services
from apps.runtime.tools import exec as exec_tool
from apps.tenants.actors import Actor
from apps.toolkit import processes, registry
from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult
from apps.toolkit.shell_deny import DENY_GROUP_NAMES
from tests import factories

pytestmark = pytest.mark.django_db

ALL_GROUPS_OFF = {name: False for name in DENY_GROUP_NAMES}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return workspace


@pytest.fixture(params=["jail", "host"])
def mode(request, settings) -> str:
    settings.TOOLGATE_ALLOW_HOST_EXEC = request.param == "host"
    return str(request.param)


@pytest.fixture
def make_ctx(tenant_a, ws, mode):
    agent = services.agent_create(actor=Actor.system(tenant_a), key="exec-agent", name="Exec agent")

    def make(exec_settings=None) -> CallContext:
        ctx = factories.call_context(tenant_a, agent, ws, tool_settings={"exec": exec_settings or {}})
        return dataclasses.replace(ctx, sandbox={"mode": mode})

    return make


def seen(mode: str, ws: Path, relative: str = "") -> str:
    """How a command sees ``ws/relative``: at /workspace in the jail, at its own path on the host."""
    base = "/workspace" if mode == "jail" else str(ws.resolve())
    return f"{base}/{relative}" if relative else base


def no_process_runs(marker: str, seconds: float = 5.0) -> bool:
    """Whether, within ``seconds``, no process on the host has ``marker`` in its command line (a
    jailed process's pid means nothing outside its pid namespace)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [
            p for p in psutil.process_iter(["cmdline", "status"])
            if marker in " ".join(p.info["cmdline"] or ()) and p.info["status"] != psutil.STATUS_ZOMBIE
        ]  # fmt: skip
        if not alive:
            return True
        time.sleep(0.1)
    return False


def run(ctx: CallContext, command: str, **args) -> ToolResult:
    implementation = registry.implementation("exec")
    assert implementation is exec_tool.exec_command
    return implementation(ctx, {"command": command, **args})


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_captures_stdout_and_stderr(make_ctx):
    result = run(make_ctx(), "echo hello; echo oops >&2")
    assert not result.is_error
    assert result.for_llm.startswith("hello")
    assert "STDERR:\noops" in result.for_llm
    assert "[exit code: 0]" in result.for_llm
    assert result.data["exit_code"] == 0
    assert result.data["cwd"] == "."


def test_non_zero_exit_is_an_error_that_keeps_the_output(make_ctx):
    result = run(make_ctx(), "echo partial; echo why >&2; exit 3")
    assert result.is_error
    assert result.data["exit_code"] == 3
    assert "partial" in result.for_llm
    assert "why" in result.for_llm
    assert "[exit code: 3]" in result.for_llm


def test_runs_in_the_workspace_with_stdin_closed(make_ctx, ws, mode):
    result = run(make_ctx(), "pwd; cat; echo after-cat")
    assert not result.is_error
    lines = result.for_llm.splitlines()
    assert lines[0] == seen(mode, ws)
    assert lines[1] == "after-cat"  # cat read EOF at once: stdin is /dev/null


def test_timeout_kills_the_whole_process_group(make_ctx, ws, mode):
    started = time.monotonic()
    result = run(make_ctx(), "sleep 301 & echo $! > child.pid; echo $$ > shell.pid; sleep 302", timeout=1)
    assert time.monotonic() - started < 10
    assert result.is_error
    assert result.data["timed_out"] is True
    assert result.data["exit_code"] is None
    assert "timed out after 1s" in result.for_llm
    assert no_process_runs("sleep 301"), "the background child survived the timeout"
    assert no_process_runs("sleep 302")
    if mode == "host":
        assert _wait_gone(int((ws / "child.pid").read_text()))
        assert _wait_gone(int((ws / "shell.pid").read_text()))


def test_background_leftovers_die_with_the_call(make_ctx, ws, mode):
    result = run(make_ctx(), "sleep 303 & echo $! > bg.pid; echo started")
    assert not result.is_error
    assert "started" in result.for_llm
    assert no_process_runs("sleep 303")
    if mode == "host":
        assert _wait_gone(int((ws / "bg.pid").read_text()))


def test_timeout_default_setting_and_clamp():
    assert exec_tool.effective_timeout(None, {}) == 60
    assert exec_tool.effective_timeout(None, {"timeout_seconds": 120}) == 120
    assert exec_tool.effective_timeout(10, {"timeout_seconds": 120}) == 10
    assert exec_tool.effective_timeout(9999, {}) == 300
    assert exec_tool.effective_timeout(None, {"timeout_seconds": 5000}) == 300
    assert exec_tool.effective_timeout(0, {}) == 1
    assert exec_tool.effective_timeout(True, {}) == 60


def test_settings_timeout_applies(make_ctx):
    result = run(make_ctx({"timeout_seconds": 1}), "sleep 30")
    assert result.data["timed_out"] is True


def test_output_is_capped_at_one_mebibyte(make_ctx):
    result = run(make_ctx(), "head -c 3000000 /dev/zero | tr '\\0' a")
    assert not result.is_error
    assert result.data["stdout_truncated"] is True
    assert "[output truncated at 1MB]" in result.for_llm
    assert result.for_llm.split("\n", 1)[0] == "a" * processes.OUTPUT_CAP_BYTES


def test_stderr_is_capped_separately(make_ctx):
    result = run(make_ctx(), "head -c 2000000 /dev/zero | tr '\\0' b >&2; echo fine")
    assert result.data["stderr_truncated"] is True
    assert result.data["stdout_truncated"] is False
    assert "fine" in result.for_llm
    assert "[stderr truncated at 1MB]" in result.for_llm


def test_endless_output_does_not_exhaust_memory(make_ctx):
    process = psutil.Process()
    before = process.memory_info().rss
    result = run(make_ctx(), "yes exec-output-line", timeout=2)
    assert result.data["timed_out"] is True
    assert result.data["stdout_truncated"] is True
    assert len(result.for_llm) < processes.OUTPUT_CAP_BYTES + 4096
    # `yes` writes gigabytes in two seconds; the process keeps only the capped megabyte.
    assert process.memory_info().rss - before < 64 * 1024 * 1024


def test_environment_is_minimal_and_sanitised(make_ctx, ws, mode, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "server-secret-key-value")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/x")
    monkeypatch.setenv("FIELD_ENCRYPTION_KEY", "fernet-key-value")
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    monkeypatch.setenv("GH_TOKEN", "ghp_server_token")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "config.settings")
    result = run(make_ctx({"deny_groups": {"env_dump": False}}), "env")
    assert not result.is_error, result.for_llm
    names = {line.split("=", 1)[0] for line in result.for_llm.splitlines() if "=" in line}
    for leaked in ("SECRET_KEY", "DATABASE_URL", "FIELD_ENCRYPTION_KEY", "LD_PRELOAD", "GH_TOKEN"):
        assert leaked not in names
    assert not any(name.startswith("DJANGO") or name.startswith("TOOLGATE") for name in names)
    for value in ("server-secret-key-value", "postgres://", "fernet-key-value", "evil.so", "ghp_"):
        assert value not in result.for_llm
    assert f"HOME={seen(mode, ws)}" in result.for_llm
    assert "TERM=dumb" in result.for_llm
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in result.for_llm


def test_sanitize_env_strips_seed_003_list():
    dirty = {
        "LD_PRELOAD": "x", "LD_AUDIT": "x", "LD_ANYTHING": "x", "DYLD_INSERT_LIBRARIES": "x",
        "DYLD_X": "x", "IFS": "x", "CDPATH": "x", "BASH_ENV": "x", "ENV": "x", "PROMPT_COMMAND": "x",
        "BASH_FUNC_ls%%": "x", "SHELLOPTS": "x", "BASHOPTS": "x", "GLOBIGNORE": "x", "PYTHONSTARTUP": "x",
        "PYTHONPATH": "x", "RUBYOPT": "x", "RUBYLIB": "x", "PERL5OPT": "x", "PERL5LIB": "x",
        "PERL5DB": "x", "NODE_OPTIONS": "x", "HOSTALIASES": "x", "RESOLV_HOST_CONF": "x",
        "LOCALDOMAIN": "x", "AWS_SECRET_ACCESS_KEY": "x", "OPENAI_API_KEY": "x", "KEEP": "yes",
    }  # fmt: skip
    assert processes.sanitize_env(dirty) == {"KEEP": "yes"}


@pytest.mark.parametrize("cwd", ["..", "../outside", "/etc", "/tmp", "sub/../../outside", "missing-dir"])
def test_cwd_outside_the_workspace_is_refused(make_ctx, ws, cwd):
    marker = ws / "ran"
    result = run(make_ctx(), f"touch {marker}", cwd=cwd)
    assert result.is_error
    assert "cwd" in result.for_llm or "workspace" in result.for_llm
    assert not marker.exists()


def test_cwd_through_a_symlink_out_is_refused(make_ctx, ws, tmp_path):
    (ws / "escape").symlink_to(tmp_path / "outside")
    result = run(make_ctx(), "touch escaped", cwd="escape")
    assert result.is_error
    assert not (tmp_path / "outside" / "escaped").exists()


def test_cwd_inside_the_workspace(make_ctx, ws, mode):
    result = run(make_ctx(), "pwd", cwd="sub")
    assert not result.is_error
    assert result.for_llm.splitlines()[0] == seen(mode, ws, "sub")
    assert result.data["cwd"] == "sub"


@pytest.mark.parametrize(
    "command",
    [
        "sudo id",
        "touch marker && sudo id",
        "rm -rf / --no-preserve-root",
        "env sh -c 'su -c id'",
        ":(){ :|:& };:",
        "echo x > /dev/sda",
        "chmod -R 777 /etc",
    ],
)
def test_safeguard_runs_even_when_every_deny_group_is_allowed(make_ctx, ws, command):
    result = run(make_ctx({"deny_groups": ALL_GROUPS_OFF}), command)
    assert result.is_error
    assert result.data["rule"] == "safeguard"
    assert "safeguard" in result.for_llm
    assert not (ws / "marker").exists()  # nothing ran


def test_deny_groups_apply_with_default_settings(make_ctx, ws):
    result = run(make_ctx(), "touch marker; printenv")
    assert result.is_error
    assert result.data == {"rule": "deny_group", "group": "env_dump"}
    assert "command denied by safety policy" in result.for_llm
    assert not (ws / "marker").exists()


def test_a_group_switched_off_lets_its_commands_run(make_ctx):
    result = run(make_ctx({"deny_groups": {"env_dump": False}}), "printenv HOME")
    assert not result.is_error


def test_an_unknown_or_malformed_override_keeps_groups_denied(make_ctx):
    assert run(make_ctx({"deny_groups": {"bogus": False}}), "printenv").data["group"] == "env_dump"
    assert run(make_ctx({"deny_groups": "none"}), "printenv").data["group"] == "env_dump"
    assert run(make_ctx({"deny_groups": {"env_dump": "false"}}), "printenv").data["group"] == "env_dump"


def test_grep_for_sudo_passes_the_safeguard_but_not_the_default_groups(make_ctx, ws):
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("use sudo sparingly\n")
    denied = run(make_ctx(), "grep -r sudo docs/")
    assert denied.data["group"] == "privilege_escalation"
    allowed = run(make_ctx({"deny_groups": {"privilege_escalation": False}}), "grep -r sudo docs/")
    assert not allowed.is_error
    assert "use sudo sparingly" in allowed.for_llm


def test_nul_byte_and_missing_command(make_ctx):
    assert run(make_ctx(), "ls\x00-la").is_error
    assert "NUL" in run(make_ctx(), "ls\x00-la").for_llm
    assert run(make_ctx(), "   ").is_error
    implementation = registry.implementation("exec")
    assert implementation is not None
    assert implementation(make_ctx(), {}).is_error


def test_fullwidth_command_is_normalised_before_it_runs(make_ctx):
    result = run(make_ctx(), "\uff45\uff43\uff48\uff4f normalised")  # fullwidth "echo"
    assert not result.is_error
    assert "normalised" in result.for_llm


def _warm_jail(pid: int) -> bool:
    """Whether ``pid`` is a warm jail kept for the next command (bubblewrap and the helper in it, whose
    command lines hold the helper's source), not something a command left."""
    try:
        return b"PR_SET_DUMPABLE" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_no_process_is_left_behind(make_ctx):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    run(make_ctx(), "sleep 0.1; echo done")
    time.sleep(0.1)
    after = {
        p.pid for p in psutil.Process().children(recursive=True) if not _gone(p.pid) and not _warm_jail(p.pid)
    }
    assert after <= before
    assert os.getpgrp() != 0
