"""Where a process started for a call runs: the one decision every spawning tool goes through.

``exec``, custom tools and credentialed CLIs ask :func:`placement_for` and run their program with
:meth:`Placement.run`. The call's effective ``sandbox`` settings (:mod:`apps.toolkit.sandbox_config`)
choose one of:

* ``jail`` (the default): bubblewrap around the call's workspace (:mod:`apps.toolkit.jail`);
* ``docker``: the call's container (:mod:`apps.sandbox.manager`);
* ``host``: the host itself, only where the operator allows it (``TOOLGATE_ALLOW_HOST_EXEC``).

When the jail or the container cannot be had, :meth:`Placement.run` raises one of :data:`UNAVAILABLE`,
whose message the tool returns as its error: the command is refused, never run elsewhere instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.sandbox import manager
from apps.toolkit import jail as jails
from apps.toolkit import warm_jails
from apps.toolkit.processes import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, RunOutcome, run_process
from apps.toolkit.sandbox_config import DOCKER, HOST, JAIL, SandboxConfig
from apps.toolkit.workspace import real_workspace

if TYPE_CHECKING:
    from apps.toolkit.context import CallContext

UNAVAILABLE = (jails.JailUnavailable, manager.SandboxUnavailable)


@dataclass(frozen=True)
class Placement:
    """Where one call's processes run, and how its paths and limits look from there."""

    kind: str  # JAIL, DOCKER or HOST
    workspace: Path  # the call's workspace on the host (resolved)
    config: SandboxConfig
    target: manager.Target | None = None  # DOCKER only
    jail: jails.Jail | None = None  # JAIL only

    @property
    def timeout_limit(self) -> int:
        """The longest a command may run here (a container has its own limit)."""
        return self.config.timeout_seconds if self.target is not None else MAX_TIMEOUT_SECONDS

    @property
    def default_timeout(self) -> int:
        return self.config.timeout_seconds if self.target is not None else DEFAULT_TIMEOUT_SECONDS

    def home(self) -> str:
        """``HOME`` for a program: its workspace as the program sees it (a container's /tmp when the
        workspace is not writable there)."""
        if self.target is not None:
            return self.target.home(self.workspace)
        if self.jail is not None:
            return jails.WORKDIR
        return str(self.workspace)

    def path(self, host_path: Path) -> str:
        """``host_path`` (inside the workspace) as the program sees it."""
        if self.target is not None:
            return self.target.container_path(host_path)
        if self.jail is not None:
            return self.jail.path_inside(host_path)
        return str(host_path)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,
        reuse: bool = False,
    ) -> RunOutcome:
        """Run the program ``argv`` (no shell of ours) with exactly ``env``; ``cwd`` is a host path
        inside the workspace. ``reuse``: in the jail, a warm jail of this workspace may serve it
        (:mod:`apps.toolkit.warm_jails`; only for an environment that carries no credential). Raises
        one of :data:`UNAVAILABLE` when the jail or container cannot be had, ``OSError`` when a
        program on the host cannot be started."""
        if self.target is not None:
            return manager.run(
                self.target, argv, cwd=self.target.container_path(cwd), env=env, timeout=timeout
            )
        if self.jail is not None:
            if reuse:
                outcome = warm_jails.run(self.jail, argv, cwd=cwd, env=env, timeout=timeout)
                if outcome is not None:
                    return outcome
            return jails.run(self.jail, argv, cwd=cwd, env=env, timeout=timeout)
        return run_process(argv, cwd=cwd, env=env, timeout=timeout)

    def data(self, outcome: RunOutcome) -> dict[str, Any]:
        """What a result records of where it ran."""
        if self.target is not None and isinstance(outcome, manager.Outcome):
            return {
                "sandbox": {
                    "mode": DOCKER,
                    "container": outcome.container,
                    "scope": self.target.scope,
                    "workspace_access": self.target.config.workspace_access,
                    "new_container": outcome.started_container,
                }
            }
        if self.jail is not None:
            return {
                "sandbox": {"mode": JAIL, "network": self.jail.network, "reused_jail": outcome.reused_jail}
            }
        return {"sandbox": {"mode": HOST}}

    def describe(self) -> str:
        """A short phrase for a test run's decision path."""
        if self.target is not None:
            return f"in the sandbox container ({self.target.scope} scope)"
        if self.jail is not None:
            return "in the jail" + (" with the network on" if self.jail.network else " without network")
        return "on the host (allowed by the operator)"


def placement_for(ctx: CallContext) -> Placement:
    """Where ``ctx``'s processes run (see the module docstring)."""
    config = manager.config_for(ctx)
    workspace = real_workspace(ctx.workspace)
    kind = config.kind_for(ctx.agent.key)
    if kind == DOCKER:
        return Placement(DOCKER, workspace, config, target=manager.target_for(ctx))
    if kind == HOST:
        return Placement(HOST, workspace, config)
    jail = jails.Jail(workspace=workspace, network=config.network, limits=config.jail_limits())
    return Placement(JAIL, workspace, config, jail=jail)
