"""Credentialed exec and the secure-CLI gate (SPEC B §5.3), as the ``exec`` tool runs them.

:func:`plan` reads the registry once per command (``apps.secure_cli.lookup``):

* when the first word names a binary this agent reaches, the command takes the **credentialed** path
  (:func:`run_credentialed`), where the shell deny groups do not apply but these checks do, in order:

  1. no NUL byte;
  2. no shell operator outside quotes: ``[;|&<>\\n\\r`]``, ``$(`` or ``${`` in the command with its
     single- and double-quoted parts removed (a backslash escape outside quotes stays visible, so
     ``\\"a | b\\"`` is refused): ``gh api x --jq '.[0] | .name'`` passes, ``gh api x | jq`` does not;
  3. path verification against spoofing: the program is the configured ``binary_path`` (absolute,
     executable, with the binary's base name) or the binary's name found on the safe ``PATH``, never
     the working directory; a first word with a ``/`` (``./gh``) must be that very file;
  4. ``deny_args``: each pattern searched in the arguments joined with spaces (it may span arguments);
  5. ``deny_verbose``: each pattern start-anchored against each argument (``-v`` blocks ``-vv`` and
     ``-v=1``, not ``--version``);
  6. the credentials registered with the call's scrubber (they are replaced in the output, the
     ``ToolCall`` record and everything else the call returns), then the program runs **without a
     shell**, with PATH, HOME (the workspace), LANG and USER plus the credentials, in its own process
     group, killed at the timeout, each output capped at 1 MiB;

* otherwise the command goes down the shell path, where :attr:`Plan.refusal` is the **gate**: a program
  the command would run (directly, in a chain, or through ``sh -c``, ``env``, ``nohup``, ``stdbuf``,
  ``timeout`` … up to three wrappers deep; deeper is refused) that is registered, enabled, not global
  and not granted to this agent is refused. When the registry cannot be read, everything is refused.

A :class:`Trace` records each decision for the administrators' test run.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import regex

from apps.sandbox.placement import UNAVAILABLE
from apps.secure_cli import lookup
from apps.secure_cli.lookup import LookupUnavailable, ResolvedCLI
from apps.toolkit import jail, processes, shell_parse
from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult

if TYPE_CHECKING:
    from apps.sandbox.placement import Placement

logger = logging.getLogger(__name__)

PREFIX = "[CREDENTIALED EXEC]"
GATE_UNAVAILABLE = "Secure CLI gate temporarily unavailable. Retry in a moment."
TOO_DEEP = (
    f"Command nesting too deep (>{shell_parse.MAX_WRAPPER_DEPTH} shell wrappers). "
    "Run the program directly instead of through nested sh -c / env / timeout wrappers."
)
OPERATORS = re.compile(r"[;|&<>\n\r`]|\$\(|\$\{")
RUN_USER = "toolgate"
RUN_LANG = "C.UTF-8"
TIMEOUT_HINT = "an administrator sets this CLI's timeout"


def unquoted_segments(command: str) -> str:
    """``command`` with its single- and double-quoted parts removed; backslash escapes outside quotes
    are kept (both characters), so an escaped quote does not open a quoted part."""
    out: list[str] = []
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch == "\\":
            out.append(command[i : i + 2])
            i += 2
            continue
        if ch == "'":
            close = command.find("'", i + 1)
            i = n if close < 0 else close + 1
            out.append(" ")
            continue
        if ch == '"':
            j = i + 1
            while j < n and command[j] != '"':
                j += 2 if command[j] == "\\" else 1
            i = j + 1
            out.append(" ")
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def shell_operators(command: str) -> list[str]:
    """The shell operators found outside quotes, in order, each once."""
    found: list[str] = []
    for match in OPERATORS.finditer(unquoted_segments(command)):
        token = match.group(0)
        if token not in found:
            found.append(token)
    return found


def first_word(command: str) -> str:
    """The command's first word with its quotes taken off (``'gh'`` is ``gh``), for the lookup."""
    parts = command.strip().split(None, 1)
    return parts[0].replace("'", "").replace('"', "").replace("\\", "") if parts else ""


# An administrator's pattern runs on an agent's arguments: bounded in time, and a pattern that does not
# finish in time counts as matching (the command is refused, never let through).
PATTERN_TIMEOUT = 0.2


@lru_cache(maxsize=512)
def _pattern(pattern: str, anchored: bool) -> regex.Pattern[str] | None:
    try:
        return regex.compile(f"(?:{pattern})" if anchored else pattern)
    except regex.error:
        return None


def _hits(pattern: str, text: str, *, anchored: bool) -> bool:
    compiled = _pattern(pattern, anchored)
    if compiled is None:
        logger.warning("secure CLI: invalid deny pattern skipped")
        return False
    try:
        found = (compiled.match if anchored else compiled.search)(text, timeout=PATTERN_TIMEOUT)
    except TimeoutError:
        logger.warning("secure CLI: a deny pattern ran out of time; the command is refused")
        return True
    return found is not None


def verbose_match(patterns: tuple[str, ...], args: list[str]) -> str | None:
    """The first ``deny_verbose`` pattern that matches the start of an argument."""
    for pattern in patterns:
        if any(_hits(pattern, arg, anchored=True) for arg in args):
            return pattern
    return None


def args_match(patterns: tuple[str, ...], args: list[str]) -> str | None:
    """The first ``deny_args`` pattern found in the arguments joined with spaces."""
    joined = " ".join(args)
    for pattern in patterns:
        if _hits(pattern, joined, anchored=False):
            return pattern
    return None


@dataclass
class Trace:
    """The decisions taken on one command, in order (shown to administrators; never a secret)."""

    steps: list[dict[str, str]] = field(default_factory=list)

    def add(self, step: str, outcome: str, detail: str = "") -> None:
        self.steps.append({"step": step, "outcome": outcome, "detail": detail})


@dataclass(frozen=True)
class Plan:
    """What the registry decided for one command: a credentialed route, or the gate's refusal (if any)
    for the shell path."""

    route: ResolvedCLI | None = None
    refusal: str | None = None


def programs(command: str) -> tuple[list[str], bool]:
    """Every program ``command`` would run (base names, every checking variant, through chains,
    substitutions and wrappers), and whether the nesting was too deep to follow."""
    names: list[str] = []
    too_deep = False
    for _variant, parsed in shell_parse.iter_all_commands(command):
        too_deep = too_deep or parsed.too_deep
        for simple in parsed.commands:
            if simple.name and simple.name not in names:
                names.append(simple.name)
    return names, too_deep


def plan(ctx: CallContext, command: str, trace: Trace | None = None) -> Plan:
    """Look the (normalised) ``command`` up for the call's agent and user (see the module docstring)."""
    trace = trace if trace is not None else Trace()
    names, too_deep = programs(command)
    try:
        found = lookup.scan(
            tenant=ctx.tenant, agent=ctx.agent, first=first_word(command), programs=names, user_id=ctx.user_id
        )
    except LookupUnavailable:
        logger.warning("secure CLI registry unavailable; command refused", extra={"call_id": ctx.call_id})
        trace.add("lookup", "refused", "the registry of credentialed CLIs could not be read")
        return Plan(refusal=GATE_UNAVAILABLE)
    if found.route is not None:
        route = found.route
        grant = "global binary" if route.binary.is_global else "agent grant"
        if route.grant is not None and route.binary.is_global:
            grant = "global binary with an agent grant"
        trace.add("lookup", "credentialed", f"{route.name}: {grant}")
        return Plan(route=route)
    if too_deep:
        trace.add("gate", "refused", "nesting too deep")
        return Plan(refusal=TOO_DEEP)
    if found.ungranted:
        name = found.ungranted[0]
        trace.add("gate", "refused", f"{name} is restricted and not granted to this agent")
        return Plan(
            refusal=f'Binary "{name}" requires a secure CLI grant. Ask admin to grant access to this agent.'
        )
    trace.add("lookup", "not credentialed", "no registered binary this agent reaches")
    return Plan()


def routes_credentialed(ctx: CallContext, command: str) -> bool:
    """Whether ``exec`` would take the credentialed path for ``command`` (False when the registry
    cannot be read: the tool then refuses the command itself)."""
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError:
        return False
    return plan(ctx, normalised).route is not None


def _resolve_program(route: ResolvedCLI, word: str, cwd: Path) -> tuple[str, str] | str:
    """(the path to run, its real path), or why the program cannot be trusted to be the registered one."""
    name = route.name
    configured = route.binary.binary_path
    if configured:
        if (
            not os.path.isabs(configured)
            or os.path.basename(configured).lower() != name
            or not (os.path.isfile(configured) and os.access(configured, os.X_OK))
        ):
            return (
                f"{PREFIX} binary path mismatch: the configured path for {name} is not an executable "
                "file of that name. Ask an administrator to fix the CLI's binary_path."
            )
        program = configured
    else:
        found = shutil.which(name, path=processes.SAFE_PATH)
        if found is None:
            return (
                f"{PREFIX} {name} is not installed on this server (looked in {processes.SAFE_PATH}). "
                "Ask an administrator to install it or to set its binary_path."
            )
        program = found
    real = os.path.realpath(program)
    if "/" in word and os.path.realpath(os.path.join(cwd, word)) != real:
        return (
            f"{PREFIX} binary path mismatch: {word} is not the registered {name}. "
            f"Call it by its name: {name} …"
        )
    return program, real


def _sandbox_program(route: ResolvedCLI, word: str) -> str:
    """The program to run in the sandbox, or why not: the configured ``binary_path``, else the name
    found on the container's safe PATH (the workspace is never on it); a path typed by the agent must be
    exactly the configured one."""
    name = route.name
    configured = route.binary.binary_path
    if "/" in word and word != configured:
        return (
            f"{PREFIX} binary path mismatch: {word} is not the registered {name}. "
            f"Call it by its name: {name} …"
        )
    return configured or name


def run_credentialed(
    ctx: CallContext,
    command: str,
    route: ResolvedCLI,
    cwd: Path,
    trace: Trace | None = None,
    *,
    place: Placement,
) -> ToolResult:
    """The credentialed path for a (normalised) ``command`` whose first word is ``route``'s binary, run
    where ``place`` says: the jail (default), the call's container, or the host where the operator
    allows it (refused, never run elsewhere, when the jail or the container cannot be had)."""
    trace = trace if trace is not None else Trace()
    name = route.name
    if "\x00" in command:
        trace.add("nul", "refused")
        return ToolResult.error("command contains invalid NUL byte", credentialed=name)
    operators = shell_operators(command)
    if operators:
        trace.add("operators", "refused", " ".join(operators))
        return ToolResult.error(
            f"{PREFIX} Shell operators not supported. Detected: {' '.join(operators)}. Run {name} alone, "
            "without pipes, redirections, chains or substitutions; quote arguments that contain them "
            "(--jq '.[0] | .name').",
            credentialed=name,
        )
    trace.add("operators", "passed", "none outside quotes")
    # No shell will run: quoted "$(…)" and backticks are plain text in an argument. The first command
    # the reader finds is the top-level one (substitutions come after it).
    parsed = shell_parse.parse(command)
    top = parsed.commands[:1]
    if len(parsed.segments) != 1 or not top or top[0].redirects or not top[0].argv:
        trace.add("parse", "refused", "not one simple command")
        return ToolResult.error(
            f"{PREFIX} Could not read the command as one program with arguments. Run {name} alone.",
            credentialed=name,
        )
    word, args = first_word(command), list(top[0].argv[1:])

    if place.target is not None:
        program = _sandbox_program(route, word)
        if program.startswith(PREFIX):
            trace.add("path", "refused", word)
            return ToolResult.error(program, credentialed=name)
        trace.add("path", "passed", f"{program} in the sandbox container")
    else:
        resolved = _resolve_program(route, word, cwd)
        if isinstance(resolved, str):
            trace.add("path", "refused", word)
            return ToolResult.error(resolved, credentialed=name)
        program, real = resolved
        if place.jail is not None and not jail.visible(real):
            trace.add("path", "refused", f"{real} is not visible in the jail")
            return ToolResult.error(
                f"{PREFIX} {name} ({real}) is not visible in the jail, which shows only the system's "
                "directories and those the operator lists in TOOLGATE_JAIL_RO_PATHS. Ask an administrator "
                "to install it under /usr or to list its directory there.",
                credentialed=name,
            )
        trace.add("path", "passed", f"{real} {place.describe()}")

    matched = args_match(route.deny_args, args)
    if matched is not None:
        trace.add("deny_args", "refused", matched)
        return ToolResult.error(
            f"{PREFIX} Command blocked by security policy: these arguments of {name} are not allowed. "
            f"Matched deny pattern: {matched}",
            credentialed=name,
        )
    trace.add("deny_args", "passed", f"{len(route.deny_args)} pattern(s), {route.sources['deny_args']}")
    matched = verbose_match(route.deny_verbose, args)
    if matched is not None:
        trace.add("deny_verbose", "refused", matched)
        return ToolResult.error(
            f"{PREFIX} Command blocked by security policy: verbose or debug output of {name} can print "
            f"credentials. Matched deny pattern: {matched}",
            credentialed=name,
        )
    count = len(route.deny_verbose)
    trace.add("deny_verbose", "passed", f"{count} pattern(s), {route.sources['deny_verbose']}")

    # Registered before anything runs: whatever the program prints, the call's outputs and its record
    # are scrubbed of every credential value.
    for value in route.env.values():
        ctx.scrubber.register(value)
    env = {"PATH": processes.SAFE_PATH, "HOME": place.home(), "LANG": RUN_LANG, "USER": RUN_USER}
    env.update(
        {
            key: value
            for key, value in route.env.items()
            if key not in processes.ENV_STRIP_NAMES and not key.startswith(processes.ENV_STRIP_PREFIXES)
        }
    )
    trace.add(
        "env",
        "injected",
        ", ".join(f"{k} ({route.env_sources[k]})" for k in sorted(route.env_sources)) or "none",
    )
    timeout = route.timeout_seconds
    trace.add("timeout", "set", f"{timeout}s ({route.sources['timeout_seconds']})")

    try:
        outcome = place.run([program, *args], cwd=cwd, env=env, timeout=timeout)
    except UNAVAILABLE as error:
        trace.add("run", "refused", str(error))
        return ToolResult.error(f"{PREFIX} {error}", credentialed=name, rule="sandbox")
    except OSError as error:
        trace.add("run", "failed", error.strerror or type(error).__name__)
        return ToolResult.error(f"could not start {name}: {error.strerror or error}.", credentialed=name)
    text = processes.format_outcome(outcome, timeout, timeout_hint=TIMEOUT_HINT)
    trace.add("run", "timed out" if outcome.timed_out else "finished", f"exit code {outcome.exit_code}")
    return processes.outcome_result(ctx, outcome, text, cwd, **place.data(outcome), credentialed=name)
