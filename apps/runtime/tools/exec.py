"""The ``exec`` tool: run one shell command in the call's workspace (seed 000 §4, SPEC B §5.3).

A command whose first word is a credentialed CLI this agent reaches (``apps.secure_cli``) takes the
credentialed path instead: no shell, its own checks, credentials injected and scrubbed.

This is the documented exception to "no shell": the command goes to ``/bin/sh -c`` only after

1. the unconditional safeguard (:mod:`apps.toolkit.safeguard`): always, whatever the settings;
2. the configurable deny groups (:mod:`apps.toolkit.shell_deny`) with the effective
   ``tools.exec.deny_groups`` overrides (agent over tenant); ``package_install`` is skipped for a call
   whose approval covered it (``CallContext.approved_deny_groups``);
3. the secure-CLI gate: no program of the command may be a restricted CLI the agent is not granted.

and then runs where the call's processes run (:mod:`apps.sandbox.placement`): in the jail by
default (:mod:`apps.toolkit.jail`: only the workspace, at ``/workspace``, no network unless turned on),
in the call's Docker container, or on the host only where the operator allows it. The checks above are
the second layer; the jail is the guarantee. It runs with:

* the working directory inside the workspace (``cwd`` resolved with
  :func:`apps.toolkit.workspace.resolve_path`: no escapes, no symlinks);
* a minimal environment built from scratch (PATH, HOME = the workspace as the command sees it, LANG,
  TERM=dumb), never the server's, which holds ``SECRET_KEY``, ``DATABASE_URL`` and the like; seed
  003's strip list is applied on top so no loader or shell start-up variable can ever get through;
* its own session and process group, so a timeout kills every process it started (SIGTERM to the
  group, 3 s grace, then SIGKILL), and no leftover background process outlives the call;
* stdin closed, stdout and stderr read incrementally and kept up to 1 MiB each (the rest is drained
  and dropped, so a command printing forever costs no memory).

Output is scrubbed of credentials by the pipeline, not here.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.sandbox.placement import UNAVAILABLE, placement_for
from apps.secure_cli import execution
from apps.toolkit import safeguard, shell_deny, shell_parse
from apps.toolkit.context import CallContext
from apps.toolkit.processes import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    SHELL,
    TIMEOUT_HINT,
    RunOutcome,
    format_outcome,
    minimal_env,
    outcome_result,
)
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import real_workspace, resolve_cwd

if TYPE_CHECKING:
    from apps.sandbox.placement import Placement

SANDBOX_TIMEOUT_HINT = "run shorter steps, or pass a larger timeout (at most the sandbox's limit)"
KILLED_EXIT_CODE = 128 + 9  # sh's status for a child killed by SIGKILL
# The one deny group an exec approval can lift (SPEC B §6.2: package installs go to approval).
APPROVABLE_DENY_GROUP = "package_install"


def effective_timeout(
    requested: Any,
    settings: Mapping[str, Any],
    *,
    limit: int = MAX_TIMEOUT_SECONDS,
    default: int = DEFAULT_TIMEOUT_SECONDS,
) -> int:
    """Seconds allowed: the call's ``timeout``, else ``tools.exec.timeout_seconds``, else ``default``
    (60); always clamped to 1..``limit`` (300; in the sandbox, its own ``timeout_seconds``, which is
    also the default there). Booleans and non-integers fall back to the default."""
    for value in (requested, settings.get("timeout_seconds")):
        if isinstance(value, int) and not isinstance(value, bool):
            return max(1, min(limit, value))
    return default


@tool("exec")
def exec_command(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Run ``args["command"]`` in the workspace after the safeguard and the deny groups."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return ToolResult.error("command is required: the shell command to run.")
    try:
        normalised = shell_parse.normalize(command)
    except shell_parse.NulByteError as error:
        return ToolResult.error(f"{error}; send the command as plain text.")
    settings = ctx.settings_for("exec")

    cwd = resolve_cwd(ctx, args.get("cwd"))
    if isinstance(cwd, str):
        return ToolResult.error(cwd)
    workspace = real_workspace(ctx.workspace)

    # 0. Credentialed routing first: a registered CLI this agent reaches runs without a shell, with its
    # credentials (apps.secure_cli.execution); the same lookup gives the gate's verdict for the shell.

    place = placement_for(ctx)  # the jail (default), the call's container, or the host where allowed
    plan = execution.plan(ctx, normalised)
    if plan.route is not None:
        return execution.run_credentialed(ctx, normalised, plan.route, cwd, place=place)

    # 1. Safeguard: unconditional; no setting, approval or deny-group override reaches past it.
    blocked = safeguard.check_shell(command, workspace=workspace, cwd=cwd)
    if blocked is not None:
        return ToolResult.error(blocked, rule="safeguard")

    # 2. Deny groups, with the effective overrides (a malformed value counts as "no overrides": every
    # group stays denied).
    overrides = settings.get("deny_groups", {})
    if not isinstance(overrides, Mapping):
        overrides = {}
    if APPROVABLE_DENY_GROUP in ctx.approved_deny_groups:
        # A human (or the system origin) approved this very call: its package install may run.
        overrides = {**overrides, APPROVABLE_DENY_GROUP: False}
    denial = shell_deny.check_command(command, overrides)
    if denial is not None:
        return ToolResult.error(denial.message, rule="deny_group", group=denial.group)

    # 3. The secure-CLI gate: a restricted CLI this agent is not granted is not reachable through the
    # shell either (sh -c, env, nohup, timeout … up to 3 deep); an unreadable registry refuses all.
    if plan.refusal is not None:
        return ToolResult.error(plan.refusal, rule="secure_cli_gate")

    # 4. Run, confined: the safeguard and the deny groups above are the second layer, the jail (or
    # container) is the guarantee.
    timeout = effective_timeout(
        args.get("timeout"), settings, limit=place.timeout_limit, default=place.default_timeout
    )
    try:
        outcome = place.run(
            [SHELL, "-c", normalised],
            cwd=cwd,
            env=minimal_env(Path(place.home())),
            timeout=timeout,
            reuse=True,  # Toolgate's minimal environment, no credential: a warm jail may serve it
        )
    except UNAVAILABLE as error:
        return ToolResult.error(str(error), rule="sandbox")
    except OSError as error:
        return ToolResult.error(f"could not start the command: {error.strerror or error}.")
    hint = SANDBOX_TIMEOUT_HINT if place.target is not None else TIMEOUT_HINT
    text = format_outcome(outcome, timeout, timeout_hint=hint)
    note = run_notes(outcome, place)
    if note:
        text = f"{text}\n{note}"
    return outcome_result(ctx, outcome, text, cwd, **place.data(outcome))


def run_notes(outcome: RunOutcome, place: Placement) -> str:
    """What a model needs to read a confined failure: a kill by signal 9 is most often a memory limit,
    and exit codes of the jail's limits say which one was hit."""
    if outcome.timed_out:
        return ""
    if place.target is not None and outcome.exit_code == KILLED_EXIT_CODE:
        return (
            f"[the command was killed (signal 9): it may have used more than the sandbox's "
            f"{place.target.config.memory_mb} MB of memory]"
        )
    if place.jail is not None:
        limits = place.jail.limits
        if outcome.exit_code == 128 + signal.SIGXCPU:
            return f"[the command was stopped after {limits.cpu_seconds} CPU seconds, the jail's limit]"
        if outcome.exit_code == 128 + signal.SIGXFSZ:
            return f"[the command wrote a file larger than {limits.file_size_mb} MB, the jail's limit]"
    return ""
