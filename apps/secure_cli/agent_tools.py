"""The credentialed_exec tool: run a registered CLI (gh, aws, kubectl, …) by name with a list of
arguments, never through a shell, with the credentials its registration injects.

It takes exactly the credentialed path ``exec`` takes for such a command (``execution.run_credentialed``:
the binary's path check, its deny patterns, the sandbox when it applies, scrubbing of the injected
values); the arguments are joined with shell quoting, so nothing in them can become an operator. A
binary this agent does not reach (unregistered, not granted, disabled) is refused with the reason; other
programs run with ``exec``.
"""

from __future__ import annotations

import shlex
from typing import Any

from apps.sandbox.placement import placement_for
from apps.secure_cli import execution
from apps.secure_cli.lookup import normalize_name
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import resolve_cwd

MAX_ARGS = 200
MAX_ARG_CHARS = 8_192


@tool("credentialed_exec")
def credentialed_exec(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    binary = args.get("binary")
    if not isinstance(binary, str) or not binary.strip():
        return ToolResult.error("binary is required: the name of a registered CLI (e.g. gh).")
    if "/" in binary or any(ch.isspace() for ch in binary) or "\x00" in binary:
        return ToolResult.error("binary is a CLI's name (e.g. gh), without a path, spaces or arguments.")
    argv = args.get("args", [])
    if not isinstance(argv, list) or len(argv) > MAX_ARGS:
        return ToolResult.error(f"args is a list of at most {MAX_ARGS} strings.")
    for value in argv:
        if not isinstance(value, str) or len(value) > MAX_ARG_CHARS or "\x00" in value:
            return ToolResult.error(
                f"every argument is a string of at most {MAX_ARG_CHARS} characters, without NUL."
            )
    cwd = resolve_cwd(ctx, args.get("cwd"))
    if isinstance(cwd, str):
        return ToolResult.error(cwd)
    command = shlex.join([binary, *argv])
    plan = execution.plan(ctx, command)
    if plan.route is None or plan.route.name != normalize_name(binary):
        reason = plan.refusal or f"{binary} is not a registered CLI this agent may use"
        return ToolResult.error(
            f"{reason}. credentialed_exec runs the registered CLIs listed in the agent's tools guidance; "
            "run other programs with exec."
        )

    return execution.run_credentialed(ctx, command, plan.route, cwd, place=placement_for(ctx))
