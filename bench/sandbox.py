"""What confinement adds to a command: the jail (bubblewrap) and a ``docker exec`` in a reused container,
against the host, in one run.

Against the real Docker engine at ``TOOLGATE_DOCKER_URL``, with the busybox image of
:mod:`apps.sandbox.image` (built when missing), under a throwaway installation label
(``TOOLGATE_SANDBOX_INSTANCE``) whose containers are removed at the end. The calls go to the ``exec``
tool as the pipeline makes them (a ``CallContext`` with the agent's effective ``sandbox`` settings): the
safeguard, the deny groups and the secure-CLI gate run in both modes, only where the command runs
differs. The sandbox has its defaults (session scope, 512 MB, 1 CPU, no network, read-only root).

* warm: the same command in sandbox mode ``jail`` (the default: a warm jail of the workspace reused,
  :mod:`apps.toolkit.warm_jails`; and, for comparison, a new jail per command, ``TOOLGATE_JAIL_WARM=0``),
  mode ``docker`` (the session's reused container) and mode ``host`` (the host's ``/bin/sh`` in the
  workspace, allowed for the bench with ``TOOLGATE_ALLOW_HOST_EXEC``): the host and the jails one after
  the other so that all meet the same load, the container in a loop of its own (the engine's work
  after an exec would otherwise land on the next command); ``echo hi`` (nothing but the overhead) and
  ``ls -la | wc -l`` (a pipe of two programs over the workspace's 40 files). All must print the same.
  The jail's goal: a median at most 2x the host's and at most 0.3x the warm container's.
* cold: the first call of a session, which creates and starts the container (removed before each run).
* layers, for ``echo hi``: the host runner alone (``run_command``), the warm jail alone
  (``warm_jails.run``: the helper's spawn and clean-up), a new jail alone (``jail.run``:
  the limits, bubblewrap's namespaces and mounts), the engine's own exec (create, start, inspect; no
  wrapper), and ``manager.run`` (the wrapper with ``setsid``, the reading thread, the use count), so
  the difference between the tool's figures can be put where it belongs.

Run alone with ``python -m bench.sandbox`` (it makes and drops its own bench database), or as part of
``python -m bench`` (left out with ``--skip-sandbox``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker

    from apps.tenants.models import Tenant
    from apps.toolkit.context import CallContext

RUNS = 50
WARM_JAILS = 4  # TOOLGATE_JAIL_WARM for the default jail's rows (its default)
COLD_RUNS = 10
WARMUP = 5
FILES = 40
COMMANDS = ("echo hi", "ls -la | wc -l")
TIMEOUT_SECONDS = 60


class EngineUnavailable(RuntimeError):
    """The Docker engine does not answer, or the busybox image cannot be built."""


@dataclass(frozen=True)
class Row:
    label: str
    samples: list[float]  # milliseconds
    baseline: list[float] | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    def ratio(self) -> str:
        if not self.baseline:
            return "1.0x"
        return f"{self.median / statistics.median(self.baseline):.1f}x"


def _client() -> docker.DockerClient:
    import docker
    from django.conf import settings

    from apps.sandbox import manager

    return docker.DockerClient(
        base_url=settings.TOOLGATE_DOCKER_URL,
        version=manager.API_VERSION,
        timeout=manager.API_TIMEOUT_SECONDS,
    )


def prepare() -> tuple[str, str]:
    """(engine version, image tag): the engine answers and has the busybox image (built when missing);
    raises :class:`EngineUnavailable` with what to do otherwise."""
    from django.conf import settings

    from apps.sandbox import image

    url = settings.TOOLGATE_DOCKER_URL
    client = _client()
    try:
        version = str(client.version().get("Version", "?"))
        tag = image.build_busybox_image(client)
    except image.ImageBuildError as error:
        raise EngineUnavailable(f"the busybox sandbox image cannot be built: {error}") from None
    except Exception as error:
        raise EngineUnavailable(
            f"the Docker engine at {url} does not answer ({type(error).__name__}: {error}); start it "
            "(bash scripts/docker-engine.sh), or leave the sandbox out with --skip-sandbox"
        ) from None
    finally:
        client.close()
    return version, tag


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _context(tenant: Tenant, agent: Any, workspace: Path, sandbox: dict[str, Any], call: int) -> CallContext:
    from apps.tenants.actors import Actor
    from apps.toolkit.context import CallContext
    from apps.toolkit.scrubber import Scrubber

    return CallContext(
        tenant=tenant,
        agent=agent,
        actor=Actor.system(tenant),
        call_id=f"bench-sandbox-{call}",
        workspace=workspace,
        scrubber=Scrubber(),
        session_key="bench",
        sandbox=sandbox,
    )


def _tool_call(ctx: CallContext, command: str, *, warm_jails: int | None = None) -> Callable[[], str]:
    """The exec tool's call of ``command``; ``warm_jails``: ``TOOLGATE_JAIL_WARM`` for the call (0: a new
    jail for every command), checked against where it ran."""
    from django.conf import settings

    from apps.runtime.tools.exec import exec_command

    def call() -> str:
        kept = settings.TOOLGATE_JAIL_WARM
        if warm_jails is not None:
            settings.TOOLGATE_JAIL_WARM = warm_jails
        try:
            result = exec_command(ctx, {"command": command})
        finally:
            settings.TOOLGATE_JAIL_WARM = kept
        if result.is_error:
            raise AssertionError(f"{command!r} failed: {result.for_llm}")
        if warm_jails is not None and result.data["sandbox"]["reused_jail"] != (warm_jails > 0):
            raise AssertionError(f"{command!r} did not run in the jail it was meant for: {result.data}")
        return str(result.for_llm)

    return call


def _measure(
    tenant: Tenant, agent: Any, workspace: Path, runs: int, cold_runs: int
) -> list[tuple[str, list[Row]]]:
    from apps.runtime.tools.exec import exec_command
    from apps.sandbox import manager, placement
    from apps.sandbox.models import SandboxContainer
    from apps.toolkit import jail, warm_jails
    from apps.toolkit.processes import SHELL, minimal_env, run_command

    host_ctx = _context(tenant, agent, workspace, {"mode": "host"}, 1)
    sandbox_ctx = _context(tenant, agent, workspace, {"mode": "docker"}, 2)
    jail_ctx = _context(tenant, agent, workspace, {}, 3)
    target = manager.target_for(sandbox_ctx)
    kinds = [placement.placement_for(ctx).kind for ctx in (host_ctx, sandbox_ctx, jail_ctx)]
    if target is None or kinds != ["host", "docker", "jail"]:
        raise AssertionError(f"the sandbox settings of the bench do not route as expected: {kinds}")

    warm: list[Row] = []
    for command in COMMANDS:
        on_host, in_sandbox = _tool_call(host_ctx, command), _tool_call(sandbox_ctx, command)
        in_jail = _tool_call(jail_ctx, command)
        in_warm_jail = _tool_call(jail_ctx, command, warm_jails=WARM_JAILS)
        in_new_jail = _tool_call(jail_ctx, command, warm_jails=0)
        in_jail()  # the first call runs in a new jail while the warm jail starts …
        in_jail()  # … the second waits for it and runs in it, the others reuse it
        for _ in range(WARMUP):
            if not on_host() == in_sandbox() == in_warm_jail() == in_new_jail():
                raise AssertionError(
                    f"{command!r}: the host, the container and the jail printed different things"
                )
        host: list[float] = []
        sandboxed: list[float] = []
        jailed: list[float] = []
        new_jail: list[float] = []
        # The host and the jails alternated (all meet the same load); the container in a loop of its own,
        # since the engine's work after each exec (shim, cgroups) would land on whatever runs next.
        for _ in range(runs):
            host.append(_timed(on_host))
            jailed.append(_timed(in_warm_jail))
            new_jail.append(_timed(in_new_jail))
        for _ in range(runs):
            sandboxed.append(_timed(in_sandbox))
        warm.append(Row(f"exec `{command}` on the host (mode host)", host))
        warm.append(Row(f"exec `{command}` in the sandbox container, warm (mode docker)", sandboxed, host))
        warm.append(Row(f"exec `{command}` in the jail (mode jail, the default: a warm jail)", jailed, host))
        warm.append(Row(f"exec `{command}` in a new jail (TOOLGATE_JAIL_WARM=0)", new_jail, host))

    def first_call() -> None:
        result = exec_command(sandbox_ctx, {"command": COMMANDS[0]})
        if result.is_error or not result.data["sandbox"]["new_container"]:
            raise AssertionError(f"the first call did not make a container: {result.for_llm}")

    cold_samples: list[float] = []
    for _ in range(cold_runs):
        for row in SandboxContainer.objects.for_tenant(tenant).filter(agent=agent):
            if not manager.remove(row, reason="bench"):
                raise AssertionError("the engine did not remove the bench's container")
        cold_samples.append(_timed(first_call))
    cold = [Row(f"exec `{COMMANDS[0]}`, first call: container created", cold_samples, warm[0].samples)]

    container_id = manager.ensure(target)
    api = manager.client().api
    user = f"{os.getuid()}:{os.getgid()}"  # as the manager runs every command
    env = minimal_env(Path(target.home(workspace)))
    host_env = minimal_env(workspace)
    the_jail = placement.placement_for(jail_ctx).jail
    assert the_jail is not None
    jail_env = minimal_env(Path(jail.WORKDIR))

    def host_runner() -> None:
        outcome = run_command(COMMANDS[0], cwd=workspace, env=host_env, timeout=TIMEOUT_SECONDS)
        assert outcome.exit_code == 0

    def jail_runner() -> None:
        outcome = jail.run(
            the_jail, [SHELL, "-c", COMMANDS[0]], cwd=workspace, env=jail_env, timeout=TIMEOUT_SECONDS
        )
        assert outcome.exit_code == 0, outcome.stderr.text()

    def warm_jail_runner() -> None:
        outcome = warm_jails.run(
            the_jail, [SHELL, "-c", COMMANDS[0]], cwd=workspace, env=jail_env, timeout=TIMEOUT_SECONDS
        )
        assert outcome is not None
        assert outcome.exit_code == 0, outcome.stderr.text()
        assert outcome.reused_jail

    def engine_exec() -> None:
        created = api.exec_create(
            container_id, [SHELL, "-c", COMMANDS[0]], workdir="/workspace", environment=env, user=user
        )
        api.exec_start(created["Id"], demux=True)
        assert api.exec_inspect(created["Id"])["ExitCode"] == 0

    def engine_exec_wrapped() -> None:
        argv = [
            "sh",
            "-c",
            manager._WRAPPER,
            "toolgate-exec",
            uuid.uuid4().hex[:16],
            SHELL,
            "-c",
            COMMANDS[0],
        ]
        created = api.exec_create(container_id, argv, workdir="/workspace", environment=env, user=user)
        api.exec_start(created["Id"], demux=True)
        assert api.exec_inspect(created["Id"])["ExitCode"] == 0

    def manager_run() -> None:
        outcome = manager.run(
            target, [SHELL, "-c", COMMANDS[0]], cwd="/workspace", env=env, timeout=TIMEOUT_SECONDS
        )
        assert outcome.exit_code == 0

    calls: list[tuple[str, Callable[[], None]]] = [
        ("host: run_command (sh -c in its own process group)", host_runner),
        ("jail: jail.run (limits, bubblewrap, sh -c)", jail_runner),
        ("warm jail: warm_jails.run (the helper's spawn, its clean-up)", warm_jail_runner),
        ("engine: exec create + start + inspect, no wrapper", engine_exec),
        ("engine: the same with the manager's setsid wrapper", engine_exec_wrapped),
        ("manager.run: wrapper (setsid), reader thread, use count", manager_run),
    ]
    for _ in range(WARMUP):
        for _label, call in calls:
            call()
    timings: list[list[float]] = [[] for _ in calls]
    for group in (slice(0, 3), slice(3, None)):  # host and jails alternated, then the engine's, as above
        for _ in range(runs):
            for samples, (_label, call) in zip(timings[group], calls[group], strict=True):
                samples.append(_timed(call))
    layers = [
        Row(label, samples, None if index == 0 else timings[0])
        for index, ((label, _call), samples) in enumerate(zip(calls, timings, strict=True))
    ]
    return [
        ("warm: the exec tool, container reused", warm),
        ("cold: the first call of a session", cold),
        (f"layers of `{COMMANDS[0]}`", layers),
    ]


def _cleanup(tenant: Tenant, agent: Any, instance: str) -> None:
    from apps.sandbox import manager
    from apps.sandbox.models import SandboxContainer

    manager.reset_client()
    client = _client()
    try:
        for container in client.containers.list(
            all=True, filters={"label": [f"{manager.LABEL_INSTANCE}={instance}"]}
        ):
            container.remove(force=True)
    finally:
        client.close()
    SandboxContainer.objects.for_tenant(tenant).filter(agent=agent).delete()


def _table(sections: list[tuple[str, list[Row]]]) -> list[str]:
    lines = ["| what | runs | median ms | p95 ms | vs host |", "| --- | ---: | ---: | ---: | ---: |"]
    for title, rows in sections:
        lines.append(f"| **{title}** | | | | |")
        for row in rows:
            label = row.label.replace("|", "\\|")  # a pipe in a command would end the cell
            lines.append(
                f"| {label} | {len(row.samples)} | {row.median:.2f} | {row.p95:.2f} | {row.ratio()} |"
            )
    return lines


def _summary(sections: list[tuple[str, list[Row]]]) -> list[str]:
    (_, warm), (_, cold), (_, layers) = sections
    host_echo, sandbox_echo, jail_echo, new_echo, host_ls, sandbox_ls, jail_ls, new_ls = warm
    runner, jail_alone, warm_alone, engine, wrapped, managed = layers
    goals = []
    for command, host_row, jail_row, docker_row in (
        (COMMANDS[0], host_echo, jail_echo, sandbox_echo),
        (COMMANDS[1], host_ls, jail_ls, sandbox_ls),
    ):
        vs_host = jail_row.median / host_row.median
        vs_docker = jail_row.median / docker_row.median
        met = "met" if vs_host <= 2 and vs_docker <= 0.3 else "NOT met"
        goals.append(
            f"Jail, `{command}`: {jail_row.median:.1f} ms, {vs_host:.2f}x the host "
            f"({host_row.median:.1f} ms) and {vs_docker:.2f}x the warm container "
            f"({docker_row.median:.1f} ms); goal <= 2x and <= 0.3x: {met}."
        )
    return [
        *goals,
        f"A new jail for every command: `{COMMANDS[0]}` {new_echo.median / host_echo.median:.2f}x and "
        f"`{COMMANDS[1]}` {new_ls.median / host_ls.median:.2f}x the host.",
        f"The jail alone (no tool checks) takes {warm_alone.median:.1f} ms warm and "
        f"{jail_alone.median:.1f} ms new against the host runner's {runner.median:.1f} ms: a new "
        "jail's difference is bubblewrap's namespaces and mounts.",
        f"Warm, the sandbox adds {sandbox_echo.median - host_echo.median:.0f} ms to `{COMMANDS[0]}` "
        f"({sandbox_echo.ratio()} the host) and {sandbox_ls.median - host_ls.median:.0f} ms to "
        f"`{COMMANDS[1]}` ({sandbox_ls.ratio()}).",
        f"Cold, creating and starting the container adds {cold[0].median - sandbox_echo.median:.0f} ms "
        "to the first call of a session.",
        f"Where a warm call's time goes: the engine's exec {engine.median - runner.median:.0f} ms over the "
        f"host's process start, the setsid wrapper {wrapped.median - engine.median:.0f} ms, the manager's "
        f"streamed read and use count {managed.median - wrapped.median:.0f} ms; the tool's own checks "
        f"(safeguard, deny groups, secure-CLI gate; the same in both modes) "
        f"{host_echo.median - runner.median:.0f} ms.",
    ]


def run(
    *, tenant: Tenant, runs: int = RUNS, cold_runs: int = COLD_RUNS, prepared: tuple[str, str] | None = None
) -> list[str]:
    """Measure and return the report lines. A throwaway agent of ``tenant`` makes the calls; its
    containers, rows and workspace are removed at the end."""
    from django.test import override_settings

    from apps.accounts import services
    from apps.sandbox import manager
    from apps.tenants.actors import Actor
    from apps.toolkit.workspace import workspace_for

    version, tag = prepared or prepare()
    instance = f"bench{uuid.uuid4().hex[:8]}"
    with override_settings(
        TOOLGATE_SANDBOX_IMAGE=tag,
        TOOLGATE_SANDBOX_IMAGES=[tag],
        TOOLGATE_SANDBOX_INSTANCE=instance,
        TOOLGATE_ALLOW_HOST_EXEC=True,  # the host row of the comparison
    ):
        manager.reset_client()
        agent = services.agent_create(
            actor=Actor.system(tenant), key=f"sandbox-{instance}", name="Sandbox bench"
        )
        workspace = workspace_for(tenant=tenant, agent=agent, user_id="")
        for index in range(FILES):
            (workspace / f"file-{index:02d}.txt").write_text(f"line {index}\n" * index)
        try:
            started = time.monotonic()
            sections = _measure(tenant, agent, workspace, runs, cold_runs)
            seconds = time.monotonic() - started
        finally:
            _cleanup(tenant, agent, instance)
            shutil.rmtree(workspace, ignore_errors=True)
    cores = os.cpu_count() or 0
    return [
        f"The exec sandbox (bench.sandbox): Docker {version}, image {tag} (busybox), {cores} cores, "
        f"{runs} runs per row after {WARMUP} warm-up ({cold_runs} cold starts), {seconds:.1f}s",
        "",
        *_table(sections),
        "",
        "vs host: the median over the median of the same command on the host (layers: of run_command).",
        *_summary(sections),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed runs per row (default {RUNS})")
    parser.add_argument("--cold-runs", type=int, default=COLD_RUNS, help=f"cold starts (default {COLD_RUNS})")
    args = parser.parse_args()
    if args.runs < 1 or args.cold_runs < 1:
        parser.error("--runs and --cold-runs are at least 1")

    from bench import db

    try:
        prepared = prepare()
    except EngineUnavailable as error:
        print(f"bench.sandbox: {error}", file=sys.stderr)
        return 1
    return db.with_bench_tenant(
        lambda tenant: run(tenant=tenant, runs=args.runs, cold_runs=args.cold_runs, prepared=prepared)
    )


if __name__ == "__main__":
    from bench.db import standalone

    standalone(main)
