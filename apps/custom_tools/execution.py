"""Running a custom tool (SPEC Part A, B §4.2), the documented ``sh -c`` beside ``exec``'s.

The steps, in order, each recorded for the test run's decision path:

1. ``schema``: the arguments against the tool's JSON Schema (the pipeline has done it for agent calls;
   a test run does it here, the same way);
2. ``render``: ``{{.key}}`` replaced by the shell-quoted arguments (:mod:`apps.custom_tools.rendering`);
   a missing required argument ends the call before anything runs;
3. ``working_dir``: the tool's directory resolved inside the agent's workspace (no escapes, no symlinks;
   :func:`apps.toolkit.workspace.resolve_path`); it must exist;
4. ``safeguard``: the unconditional hard limits of every shell command (:mod:`apps.toolkit.safeguard`);
5. ``deny_groups``: exec's deny groups with the agent's effective overrides, on the *rendered* command,
   refused with exec's message;
6. ``run``: ``/bin/sh -c`` where the call's processes run (:mod:`apps.sandbox.placement`: the
   jail by default, else the call's container, or the host where the operator allows it; own process
   group killed on timeout, stdin closed, 1 MiB per stream), with the tool's timeout, in an environment
   built from nothing (PATH, HOME = the workspace, LANG) with the tool's ``env`` over it — never the
   server's.

The tool's env values are registered with the call's scrubber, and masked here as well, so they never
come back in a result, a record or an answer, whatever the tenant's scrubbing setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.custom_tools import rendering
from apps.sandbox.placement import UNAVAILABLE, placement_for
from apps.toolkit import providers, safeguard, shell_deny, shell_parse
from apps.toolkit.processes import ENV_STRIP_NAMES, ENV_STRIP_PREFIXES, SHELL, RunOutcome, minimal_env
from apps.toolkit.results import ToolResult
from apps.toolkit.scrubber import MIN_VALUE_LENGTH, REDACTED
from apps.toolkit.workspace import PathError, real_workspace, relative_to_workspace, resolve_path

if TYPE_CHECKING:
    from apps.custom_tools.models import CustomTool
    from apps.toolkit.context import CallContext

STEPS = ("schema", "render", "working_dir", "safeguard", "deny_groups", "run")


@dataclass(frozen=True)
class ToolSpec:
    """What running a tool needs, read once from its row (shared between calls of one process)."""

    id: str
    name: str
    description: str
    parameters: Mapping[str, Any]
    command: str
    working_dir: str
    timeout_seconds: int
    env: Mapping[str, str]
    agent_id: str | None

    @classmethod
    def of(cls, tool: CustomTool) -> ToolSpec:
        return cls(
            id=str(tool.pk),
            name=tool.name,
            description=tool.description,
            parameters=dict(tool.parameters or {}),
            command=tool.command,
            working_dir=tool.working_dir,
            timeout_seconds=tool.timeout_seconds,
            env=tool.env,
            agent_id=str(tool.agent_id) if tool.agent_id else None,
        )

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description or f"Custom tool {self.name}.",
            "parameters": dict(self.parameters) or {"type": "object", "properties": {}},
        }

    def secrets(self) -> list[str]:
        return [value for value in self.env.values() if value]


@dataclass(frozen=True)
class Step:
    step: str
    ok: bool
    detail: str


@dataclass
class Execution:
    """A run's result, the command as rendered ("" when it was not) and the steps it went through."""

    result: ToolResult
    rendered: str = ""
    steps: list[Step] = field(default_factory=list)
    outcome: RunOutcome | None = None


def mask(text: str, secrets: list[str]) -> str:
    """``text`` without the tool's env values (longest first; values too short to tell from ordinary
    text are left, as the scrubber leaves them)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_VALUE_LENGTH:
            text = text.replace(secret, REDACTED)
    return text


def _working_dir(ctx: CallContext, spec: ToolSpec) -> Path | str:
    """The resolved working directory, or why it cannot be used."""
    try:
        if not spec.working_dir:
            return real_workspace(ctx.workspace)
        resolved = resolve_path(spec.working_dir, workspace=ctx.workspace)
    except PathError as error:
        return f"the working directory {spec.working_dir!r} cannot be used: {error}"
    if not resolved.is_dir():
        return (
            f"the working directory {spec.working_dir!r} does not exist in the agent's workspace; create it "
            "first (or ask an admin to change the tool's working directory)."
        )
    return resolved


def _environment(home: str, spec: ToolSpec) -> dict[str, str]:
    merged = {**minimal_env(Path(home)), **spec.env}
    return {
        name: value
        for name, value in merged.items()
        if name not in ENV_STRIP_NAMES and not name.startswith(ENV_STRIP_PREFIXES) and "\x00" not in value
    }


def _format(outcome: RunOutcome, timeout: int) -> str:
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
    if outcome.timed_out:
        parts.append(f"[command timed out after {timeout}s and was killed with all its processes]")
    elif outcome.exit_code != 0:
        parts.append(f"[exit code: {outcome.exit_code}]")
    return "\n".join(parts) if parts else "(command completed with no output)"


def execute(ctx: CallContext, spec: ToolSpec, args: dict[str, Any], *, check_schema: bool) -> Execution:
    """Run ``spec`` with ``args`` for the call ``ctx`` through every step (see the module docstring)."""
    secrets = spec.secrets()
    for secret in secrets:
        ctx.scrubber.register(secret)
    run = Execution(result=ToolResult.error(""))

    def stop(step: str, message: str, **data: Any) -> Execution:
        run.steps.append(Step(step, False, mask(message, secrets)))
        run.result = ToolResult.error(mask(message, secrets), tool=spec.name, step=step, **data)
        return run

    schema = dict(spec.parameters)
    if check_schema:
        args = providers.strip_empty_optional(schema, args)
        invalid = providers.schema_error(spec.name, schema, args)
        if invalid is not None:
            return stop("schema", invalid)
        run.steps.append(Step("schema", True, "the arguments match the tool's parameters."))

    try:
        rendered = rendering.render(spec.command, args, required=providers.required_parameters(schema))
    except rendering.RenderError as error:
        return stop("render", f"{spec.name}: {error}")
    run.rendered = mask(rendered, secrets)
    run.steps.append(Step("render", True, "every placeholder replaced by its argument, shell-quoted."))

    cwd = _working_dir(ctx, spec)
    if isinstance(cwd, str):
        return stop("working_dir", cwd)
    workspace = real_workspace(ctx.workspace)
    shown_cwd = relative_to_workspace(cwd, ctx.workspace)
    run.steps.append(Step("working_dir", True, f"runs in {shown_cwd!r} of the agent's workspace."))

    blocked = safeguard.check_shell(rendered, workspace=workspace, cwd=cwd)
    if blocked is not None:
        return stop("safeguard", blocked, rule="safeguard")
    run.steps.append(Step("safeguard", True, "no hard limit applies."))

    overrides = ctx.settings_for("exec").get("deny_groups", {})
    if not isinstance(overrides, Mapping):
        overrides = {}
    denial = shell_deny.check_command(rendered, overrides)
    if denial is not None:
        return stop("deny_groups", denial.message, rule="deny_group", group=denial.group)
    run.steps.append(Step("deny_groups", True, "no denied group matches the rendered command."))

    place = placement_for(ctx)  # the jail (default), the call's container, or the host where allowed
    try:
        outcome = place.run(
            [SHELL, "-c", shell_parse.normalize(rendered)],
            cwd=cwd,
            env=_environment(place.home(), spec),
            timeout=min(spec.timeout_seconds, place.timeout_limit),
        )
    except UNAVAILABLE as error:
        return stop("run", str(error), rule="sandbox")
    except OSError as error:
        return stop("run", f"could not start the command: {error.strerror or error}.")
    sandboxed = place.data(outcome)
    run.outcome = outcome
    text = mask(_format(outcome, spec.timeout_seconds), secrets)
    data: dict[str, Any] = {
        **sandboxed,
        "tool": spec.name,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "stdout_truncated": outcome.stdout.truncated,
        "stderr_truncated": outcome.stderr.truncated,
        "cwd": shown_cwd,
        "duration_ms": round(outcome.seconds * 1000),
    }
    if outcome.timed_out:
        detail = f"timed out after {spec.timeout_seconds}s; the command and its processes were killed."
    else:
        detail = f"exit code {outcome.exit_code} after {data['duration_ms']} ms."
    if place.target is not None:
        detail += (
            f" Ran in the sandbox container {sandboxed['sandbox']['container']} ({place.target.scope} scope)."
        )
    else:
        detail += f" Ran {place.describe()}."
    failed = outcome.timed_out or outcome.exit_code != 0
    run.steps.append(Step("run", not failed, detail))
    run.result = ToolResult.error(text, **data) if failed else ToolResult.ok(text, **data)
    return run
