"""Running a program for a tool: its own session and process group, stdin closed, each output stream
kept up to 1 MiB, the whole group killed at the timeout or when leftovers outlive the program; and the
environment a program gets, built from nothing (seed 003 ``sanitizedEnv()``).

The jail (:mod:`apps.toolkit.jail`) and the host both run through :func:`run_process`; the exec tool
(``apps.runtime.tools.exec``) checks a command before it gets here. :func:`format_outcome` and
:func:`outcome_result` turn a finished command into what a model reads, for the exec tool and for
credentialed exec (``apps.secure_cli.execution``) alike."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import relative_to_workspace

if TYPE_CHECKING:
    from apps.toolkit.context import CallContext

SHELL = "/bin/sh"
DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 300
KILL_GRACE_SECONDS = 3.0
TIMEOUT_HINT = "run shorter steps, or pass a larger timeout (at most 300)"
OUTPUT_CAP_BYTES = 1024 * 1024  # per stream (SPEC B §5.3: "[output truncated at 1MB]")
_READ_CHUNK = 64 * 1024
# After the shell exits, background children may still hold the pipes open; wait this long for them
# to finish writing before the group is killed.
_DRAIN_AFTER_EXIT_SECONDS = 0.5

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

# While a program runs, the call it runs for may be told to stop (its tenant suspended): a check that
# answers "" to go on, or the reason to stop, asked every STOP_CHECK_SECONDS by run_process.
StopCheck = Callable[[], str]
STOP_CHECK_SECONDS = 2.0
_stop_check: ContextVar[StopCheck | None] = ContextVar("toolgate_stop_check", default=None)


@contextmanager
def stopped_when(check: StopCheck) -> Iterator[None]:
    """Every program :func:`run_process` runs within this block (in this context) is killed with its
    whole process group as soon as ``check`` gives a reason."""
    token = _stop_check.set(check)
    try:
        yield
    finally:
        _stop_check.reset(token)


# Seed 003 ``sanitizedEnv()``: names stripped whatever their origin, plus whole prefixes.
ENV_STRIP_NAMES = frozenset(
    {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "IFS", "CDPATH", "BASH_ENV",
        "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "PYTHONSTARTUP", "PYTHONPATH",
        "RUBYOPT", "RUBYLIB", "PERL5OPT", "PERL5LIB", "PERL5DB", "NODE_OPTIONS", "HOSTALIASES",
        "RESOLV_HOST_CONF", "LOCALDOMAIN",
    }
)  # fmt: skip
ENV_STRIP_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_")
# SPEC B §5.3 ``staticCredentialEnvKeys``: never handed to a shell either.
CREDENTIAL_ENV_NAMES = frozenset(
    {
        "GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GH_CONFIG_DIR", "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY", "NPM_TOKEN", "DOCKER_PASSWORD", "DOCKER_AUTH", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "HUGGINGFACE_TOKEN",
        "HF_TOKEN", "GCP_SA_KEY", "AZURE_CLIENT_SECRET", "CLOUDFLARE_API_TOKEN",
    }
)  # fmt: skip
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sanitize_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without seed 003's dangerous variables (loader, shell start-up, interpreter hooks,
    resolver overrides) and the known credential variables; malformed names are dropped too."""
    return {
        name: value
        for name, value in env.items()
        if _ENV_NAME.match(name)
        and name not in ENV_STRIP_NAMES
        and name not in CREDENTIAL_ENV_NAMES
        and not name.startswith(ENV_STRIP_PREFIXES)
        and "\x00" not in value
    }


def minimal_env(workspace: Path) -> dict[str, str]:
    """The whole environment of a command: built from nothing, so no server variable can leak."""
    return sanitize_env(
        {"PATH": SAFE_PATH, "HOME": str(workspace), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb"}
    )


@dataclass
class Capture:
    """One output stream, kept up to the cap; everything past it is read and dropped."""

    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    truncated: bool = False

    def add(self, data: bytes) -> None:
        room = OUTPUT_CAP_BYTES - self.size
        if room <= 0:
            self.truncated = self.truncated or bool(data)
            return
        if len(data) > room:
            self.truncated = True
            data = data[:room]
        self.chunks.append(data)
        self.size += len(data)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


@dataclass
class RunOutcome:
    """What happened to a command."""

    exit_code: int | None
    stdout: Capture
    stderr: Capture
    timed_out: bool
    seconds: float
    stopped: str = ""  # why it was stopped before its end (its call's tenant suspended), if it was
    reused_jail: bool = False  # it ran in a warm jail that had run a command before (apps.toolkit.warm_jails)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A member changed its credentials (setuid binary): it is no longer ours to signal.
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a member of the group still runs. Zombies (dead, waiting to be reaped by whoever
    adopted them) do not count; without /proc, any member counts."""
    if not _signal_group(pgid, 0):  # signal 0: existence check only
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After "pid (comm)": state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _kill_group(pgid: int, process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole group, give it :data:`KILL_GRACE_SECONDS`, then SIGKILL what is left."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    while time.monotonic() < deadline:
        process.poll()  # reap our own child so it does not linger as a zombie member
        if not _group_alive(pgid):
            return
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)


def run_command(command: str, *, cwd: Path, env: Mapping[str, str], timeout: float) -> RunOutcome:
    """Run ``command`` with ``/bin/sh -c`` and collect its output within the limits (see module doc).

    The caller must already have passed the command through the safeguard and the deny groups."""
    # The documented, checked `sh -c` (STYLE "Don't" 7): an argv list, no shell=True; the command was
    # vetted by the safeguard and the deny groups before this point.
    return run_process([SHELL, "-c", command], cwd=cwd, env=env, timeout=timeout)


def run_process(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> RunOutcome:
    """Run the program ``argv`` names (no shell) in its own session and process group, stdin closed,
    each output stream kept up to 1 MiB, the whole group killed at the timeout, when leftovers outlive
    it, or when the context's stop check (:func:`stopped_when`) gives a reason."""
    started = time.monotonic()
    # A tenant's program reaches this only as the jail's argv (apps.toolkit.jail.run) or in host mode,
    # which exists only where the operator sets TOOLGATE_ALLOW_HOST_EXEC (apps.sandbox.placement).
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,  # own session and process group: the unit a timeout kills
        close_fds=True,
    )
    return supervise(_Group(process), started=started, timeout=timeout)


class Supervised(Protocol):
    """A started program as :func:`supervise` watches it: its two output streams, its exit status,
    and how to end it with everything it started."""

    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises ``subprocess.TimeoutExpired`` when it has not ended in ``timeout``."""
        ...

    def kill(self) -> None:
        """End the program and everything it started (gently first where that applies)."""

    def leftovers(self) -> bool:
        """Whether something the program started still runs after it ended."""
        ...

    def abort(self) -> None:
        """End everything at once (an unexpected error while supervising) and reap it."""


class _Group:
    """A program started by :func:`run_process`: its process group is the unit that is killed."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pgid = process.pid  # a new session's leader: its pid is the group id
        self.stdout = process.stdout
        self.stderr = process.stderr

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        _kill_group(self.pgid, self.process)

    def leftovers(self) -> bool:
        return _group_alive(self.pgid)

    def abort(self) -> None:
        _signal_group(self.pgid, signal.SIGKILL)
        self.process.wait()


def supervise(process: Supervised, *, started: float, timeout: float) -> RunOutcome:
    """Collect ``process``'s output within the caps until it ends, ending it (and all it started) at
    the timeout or when the context's stop check gives a reason (see :func:`run_process`)."""
    deadline = started + timeout
    stop_check = _stop_check.get()
    next_check = started + STOP_CHECK_SECONDS
    stopped = ""
    stdout, stderr = Capture(), Capture()
    streams: list[tuple[IO[bytes], Capture]] = []
    if process.stdout is not None:
        streams.append((process.stdout, stdout))
    if process.stderr is not None:
        streams.append((process.stderr, stderr))
    timed_out = False
    exited_at: float | None = None
    selector = selectors.DefaultSelector()
    try:
        for stream, capture in streams:
            selector.register(stream, selectors.EVENT_READ, capture)
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = process.poll() is None
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_SECONDS:
                break  # the shell is done; only leftover background processes hold the pipes
            if stop_check is not None and now >= next_check:
                next_check = now + STOP_CHECK_SECONDS
                stopped = stop_check()
                if stopped:
                    break
            wait = min(deadline - now, 0.1 if exited_at is not None else 0.5)
            for key, _ in selector.select(timeout=wait):
                # One read of what is there (never blocks after select); memory stays capped.
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    key.data.add(data)
                else:
                    selector.unregister(key.fileobj)
        if timed_out or stopped:
            process.kill()
        elif process.poll() is None:
            # Pipes closed but the shell has not exited yet (it closed its outputs): wait the rest.
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                process.kill()
        returncode = process.wait()
        if not stopped and stop_check is not None and returncode < 0:
            stopped = stop_check()  # killed from outside (a suspension's sweep of the host's jails): why
        # Anything of the group still running (a backgrounded "sleep 1000 &") dies with the call.
        if process.leftovers():
            process.kill()
    finally:
        selector.close()
        for stream, _capture in streams:
            stream.close()
        if process.poll() is None:  # only on an unexpected error above
            process.abort()
    return RunOutcome(
        exit_code=None if timed_out or stopped else process.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        stopped=stopped,
    )


def format_outcome(outcome: RunOutcome, timeout: int, *, timeout_hint: str = TIMEOUT_HINT) -> str:
    """The text a model reads: stdout, stderr, truncation notes, and the exit code or the timeout."""
    parts: list[str] = []
    stdout, stderr = outcome.stdout.text(), outcome.stderr.text()
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if outcome.stdout.truncated:
        parts.append("[output truncated at 1MB]")
    if stderr:
        parts.append("STDERR:\n" + stderr.rstrip("\n"))
    if outcome.stderr.truncated:
        parts.append("[stderr truncated at 1MB]")
    if outcome.stopped:
        parts.append(f"[command stopped and killed with all its processes: {outcome.stopped}]")
    elif outcome.timed_out:
        parts.append(
            f"[command timed out after {timeout}s and was killed with all its processes; {timeout_hint}]"
        )
    else:
        parts.append(f"[exit code: {outcome.exit_code}]")
    return "\n".join(parts) if parts else "(no output)"


def outcome_result(ctx: CallContext, outcome: RunOutcome, text: str, cwd: Path, **extra: Any) -> ToolResult:
    """The tool's result for a command that ran: ``text`` for the model, the exit code, the timeout and
    truncation flags, the working directory and the duration as data (with ``extra``); an error when
    it timed out or exited non-zero."""
    data: dict[str, Any] = {
        **extra,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        **({"stopped": outcome.stopped} if outcome.stopped else {}),
        "stdout_truncated": outcome.stdout.truncated,
        "stderr_truncated": outcome.stderr.truncated,
        "cwd": relative_to_workspace(cwd, ctx.workspace),
        "duration_ms": round(outcome.seconds * 1000),
    }
    if outcome.timed_out or outcome.stopped or outcome.exit_code != 0:
        return ToolResult.error(text, **data)
    return ToolResult.ok(text, **data)
