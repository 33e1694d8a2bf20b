"""The exec sandbox: commands of untrusted agents run in Docker containers (SPEC Part A, B §6.3).

**Where a call runs.** :func:`target_for` reads the call's effective ``sandbox`` settings
(:mod:`apps.toolkit.sandbox_config`): ``None`` means the sandbox is disabled for this agent and the
command runs on the host, the *only* case that may. Otherwise the call belongs to one container:

* ``session`` scope: one per (agent, session key, workspace); without a session key, per agent;
* ``agent`` scope: one per (agent, workspace), so an open agent's users never share one;
* ``shared`` scope: one per tenant, with the tenant's whole workspace tree (its agents share files).

The container mounts **only** that workspace (or that tenant's tree) at ``/workspace``, read-write,
read-only or not at all; never the workspace root, so no tenant ever sees another's files.

**How it is made.** ``sleep infinity`` under Docker's init, as Toolgate's own user (files it writes in
the workspace stay Toolgate's), with the limits of the configuration: memory (no swap beyond it),
CPUs, pids, no network unless enabled, read-only root, every capability dropped, no-new-privileges,
``/tmp``, ``/var/tmp`` and ``/run`` as size-bounded ``noexec,nosuid,nodev`` tmpfs. Labels name
Toolgate, this installation, the tenant, the agent and the scope. The name is derived from all of it
and from the configuration's fingerprint, so concurrent first calls in several processes meet at one
container (Docker refuses the second create; it then uses the first), and a changed configuration
gets a new container while the old one is removed.

**How a command runs.** ``docker exec`` of a small ``sh`` wrapper that starts the command with
``setsid`` in its own process group and records the group in a file on the container's tmpfs. At the
end of the command the whole group is killed, so no background leftover outlives the call. At the
timeout the group is killed from a second exec; should even that fail, the container itself is killed
(and made again at the next call): a timeout always stops the command. Output is read by a thread,
each stream kept up to 1 MiB, the rest drained and dropped, as on the host.

**Failures.** Anything that goes wrong with the engine, the image or the container raises
:class:`SandboxUnavailable`, whose message the tool returns as is: the command is refused, never run on
the host instead.

**Records.** Each container has a :class:`~apps.sandbox.models.SandboxContainer` row (tenant,
agent, scope, times, use count): how every process, the dashboard and the pruning job
(:func:`prune`: idle 24 h, older than 7 days, or orphaned) find it. Changes are published on the
tenant's ``sandbox`` topic.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import docker.errors
import requests
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.realtime import events
from apps.toolkit.processes import Capture, RunOutcome
from apps.toolkit.sandbox_config import TMPFS_MOUNTS, SandboxConfig, allowed_images
from apps.toolkit.workspace import real_workspace, workspace_root

if TYPE_CHECKING:
    from apps.sandbox.models import SandboxContainer
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.context import CallContext

logger = logging.getLogger(__name__)

CONTAINER_WORKDIR = "/workspace"
LABEL = "toolgate.sandbox"
LABEL_INSTANCE = "toolgate.instance"
LABEL_TENANT = "toolgate.tenant"
LABEL_AGENT = "toolgate.agent"
LABEL_SCOPE = "toolgate.scope"
LABEL_KEY = "toolgate.key"
LABEL_CONFIG = "toolgate.config"
TOPIC = "sandbox"
API_VERSION = "1.41"  # Docker Engine 20.10 and later
API_TIMEOUT_SECONDS = 60
KILL_GRACE_SECONDS = 3.0
# A container without a row, younger than this, may be one another process is recording right now.
ORPHAN_GRACE = timedelta(minutes=10)
_PIDFILE = "/tmp/.toolgate-exec-"  # noqa: S108 - inside the container, on its private tmpfs
# $1: the exec's token, then the program and its arguments. The program runs in a new session and
# process group (setsid, no fork: a background job is no group leader), whose id is written down for a
# timeout; when it ends, whatever is left of its group is killed with it.
_WRAPPER = (
    'f="' + _PIDFILE + '$1"; shift; '
    'setsid "$@" </dev/null & c=$!; echo "$$ $c" > "$f" 2>/dev/null; '
    'wait "$c"; r=$?; kill -KILL -"$c" 2>/dev/null; rm -f "$f"; exit "$r"'
)
_KILLER = (
    'f="' + _PIDFILE + '$1"; read w c < "$f" || exit 1; '
    'kill -KILL -"$c" 2>/dev/null; kill -KILL "$w" 2>/dev/null; rm -f "$f"; exit 0'
)


class SandboxError(Exception):
    """Base of the sandbox's errors."""


class SandboxUnavailable(SandboxError):
    """The sandbox applies but cannot run the command: it is refused (fail closed)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"sandbox unavailable: {reason} (will not fall back to unsandboxed host execution)")


class _Gone(Exception):
    """The container this process knew is no longer there or no longer running."""


@dataclass(frozen=True)
class Target:
    """The container one call runs in, and how the call's paths map into it."""

    tenant: Tenant
    agent: Agent
    config: SandboxConfig
    scope: str
    key: str  # digest of what the container serves
    session_key: str
    mount_source: Path  # the host directory behind /workspace (mounted unless access is "none")

    @property
    def name(self) -> str:
        digest = hashlib.sha256(f"{self.key}|{self.config.fingerprint()}".encode()).hexdigest()[:20]
        return f"toolgate-sbx-{instance()}-{digest}"

    def container_path(self, host_path: Path) -> str:
        """``host_path`` (inside the call's workspace) as the container sees it."""
        if self.config.workspace_access == "none":
            return CONTAINER_WORKDIR
        try:
            relative = Path(os.path.realpath(host_path)).relative_to(self.mount_source)
        except ValueError:
            return CONTAINER_WORKDIR
        return CONTAINER_WORKDIR if str(relative) == "." else f"{CONTAINER_WORKDIR}/{relative.as_posix()}"

    def home(self, workspace: Path) -> str:
        """HOME for a command: its workspace when it may write there, else the container's /tmp."""
        if self.config.workspace_access == "rw":
            return self.container_path(workspace)
        return "/tmp"  # noqa: S108 - the container's private tmpfs


def instance() -> str:
    return str(settings.TOOLGATE_SANDBOX_INSTANCE)


def config_for(ctx: CallContext) -> SandboxConfig:
    return SandboxConfig.of(ctx.sandbox)


def target_for(ctx: CallContext) -> Target | None:
    """The container the call runs in, or None when the sandbox is disabled for its agent (the one
    case in which a command runs on the host)."""
    config = config_for(ctx)
    if not config.applies_to(ctx.agent.key):
        return None
    tenant, agent = ctx.tenant, ctx.agent
    if config.scope == "shared":
        mount = Path(os.path.realpath(workspace_root() / "tenants" / str(tenant.pk)))
        parts = [str(tenant.pk), "shared"]
        session_key = ""
    else:
        mount = real_workspace(ctx.workspace)
        parts = [str(tenant.pk), config.scope, str(agent.pk), str(mount)]
        session_key = ctx.sandbox_key if config.scope == "session" else ""
        if session_key:
            parts.append(session_key)
    key = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return Target(
        tenant=tenant,
        agent=agent,
        config=config,
        scope=config.scope,
        key=key,
        session_key=session_key[:500],
        mount_source=mount,
    )


# --- the engine ---------------------------------------------------------------------------------------

_client_lock = threading.Lock()
_client: docker.DockerClient | None = None
_known: dict[str, str] = {}  # container name -> id, for this process
_name_locks: dict[str, threading.Lock] = {}

_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def client() -> docker.DockerClient:
    """This process's client of the engine at ``TOOLGATE_DOCKER_URL`` (made once, no call yet)."""
    global _client
    with _client_lock:
        if _client is None:
            try:
                _client = docker.DockerClient(
                    base_url=settings.TOOLGATE_DOCKER_URL, version=API_VERSION, timeout=API_TIMEOUT_SECONDS
                )
            except _ENGINE_ERRORS as error:
                raise SandboxUnavailable(_engine_reason(error)) from error
        return _client


def reset_client() -> None:
    """Forget the client and the containers this process knew (tests; a changed engine URL)."""
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
        _client = None
        _known.clear()


def _engine_reason(error: BaseException) -> str:
    if isinstance(error, docker.errors.ImageNotFound):
        return str(error.explanation or error)
    if isinstance(error, requests.exceptions.ConnectionError | FileNotFoundError | ConnectionError):
        return "the Docker engine cannot be reached"
    if isinstance(error, requests.exceptions.Timeout):
        return "the Docker engine did not answer in time"
    if isinstance(error, docker.errors.APIError):
        return f"the Docker engine refused: {error.explanation or error}"
    return f"the Docker engine failed: {type(error).__name__}"


def engine_status() -> dict[str, Any]:
    """Whether the engine answers, its version, and which allowed images it has (for the dashboard)."""

    try:
        api = client().api
        version = api.version()
        present = []
        for image in allowed_images():
            try:
                api.inspect_image(image)
                present.append(image)
            except docker.errors.ImageNotFound:
                pass
    except (SandboxUnavailable, *_ENGINE_ERRORS) as error:
        reason = error.reason if isinstance(error, SandboxUnavailable) else _engine_reason(error)
        return {"available": False, "reason": reason, "images": []}
    return {"available": True, "version": str(version.get("Version", "")), "images": present}


# --- containers ---------------------------------------------------------------------------------------


def _labels(target: Target) -> dict[str, str]:
    return {
        LABEL: "1",
        LABEL_INSTANCE: instance(),
        LABEL_TENANT: str(target.tenant.pk),
        LABEL_AGENT: "" if target.scope == "shared" else str(target.agent.pk),
        LABEL_SCOPE: target.scope,
        LABEL_KEY: target.key,
        LABEL_CONFIG: target.config.fingerprint(),
    }


def _run_as() -> str:
    return f"{os.getuid()}:{os.getgid()}"


def _create(target: Target) -> Any:
    config = target.config
    size = f",size={config.tmpfs_size_mb}m"
    volumes: dict[str, dict[str, str]] = {}
    if config.workspace_access != "none":
        target.mount_source.mkdir(mode=0o700, parents=True, exist_ok=True)
        volumes[str(target.mount_source)] = {"bind": CONTAINER_WORKDIR, "mode": config.workspace_access}
    # create, then start: ``containers.run`` would try to pull a missing image from a registry.
    container = client().containers.create(
        config.image,
        ["sleep", "infinity"],
        name=target.name,
        labels=_labels(target),
        init=True,  # reaps what a killed command leaves behind
        user=_run_as(),
        read_only=config.read_only_root,
        tmpfs={mount: "rw,noexec,nosuid,nodev" + size for mount in TMPFS_MOUNTS},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit=f"{config.memory_mb}m",
        memswap_limit=f"{config.memory_mb}m",  # no swap beyond the limit
        nano_cpus=int(config.cpus * 1_000_000_000),
        pids_limit=config.pids_limit,
        network_mode="bridge" if config.network else "none",
        volumes=volumes,
        working_dir=CONTAINER_WORKDIR,
        hostname="sandbox",
    )
    try:
        container.start()
    except BaseException:
        container.remove(force=True)
        raise
    container.reload()
    return container


def _find_or_create(target: Target) -> tuple[str, bool]:
    """(container id, made now)."""
    containers = client().containers
    try:
        existing = containers.get(target.name)
    except docker.errors.NotFound:
        existing = None
    if existing is not None and existing.status != "running":
        existing.remove(force=True)
        existing = None
    if existing is not None:
        return str(existing.id), False
    try:
        return str(_create(target).id), True
    except docker.errors.ImageNotFound as error:
        raise SandboxUnavailable(
            f"the sandbox image {target.config.image} is not on the Docker engine; an administrator builds "
            "it (deploy/sandbox/Dockerfile)"
        ) from error
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: another process made it a moment ago
            raise
        return str(containers.get(target.name).id), False


def ensure(target: Target) -> str:
    """The id of the running container of ``target``, made when there is none."""
    with _client_lock:
        lock = _name_locks.setdefault(target.name, threading.Lock())
    with lock:
        known = _known.get(target.name)
        if known is not None:
            return known
        try:
            container_id, made = _find_or_create(target)
        except SandboxUnavailable:
            raise
        except _ENGINE_ERRORS as error:
            raise SandboxUnavailable(_engine_reason(error)) from error
        _record(target, container_id, made=made)
        _known[target.name] = container_id
        return container_id


def _record(target: Target, container_id: str, *, made: bool) -> None:
    """The container's row (one per tenant and key): a new container replaces the row, and the
    container of an older configuration of the same key is removed."""
    from apps.sandbox.models import SandboxContainer

    rows = SandboxContainer.objects.for_tenant(target.tenant)
    now = timezone.now()
    config = target.config
    fields = {
        "scope": target.scope,
        "agent": None if target.scope == "shared" else target.agent,
        "session_key": target.session_key,
        "name": target.name,
        "container_id": container_id,
        "image": config.image,
        "fingerprint": config.fingerprint(),
        "workspace_access": config.workspace_access,
        "limits": {
            "memory_mb": config.memory_mb,
            "cpus": config.cpus,
            "pids_limit": config.pids_limit,
            "network": config.network,
            "read_only_root": config.read_only_root,
            "tmpfs_size_mb": config.tmpfs_size_mb,
        },
        "last_used_at": now,
    }
    old = rows.filter(key=target.key).first()
    if old is not None and old.container_id == container_id:
        return
    if old is not None and old.name != target.name:
        _remove_quietly(old.container_id)
    try:
        with transaction.atomic():
            if old is not None:
                rows.filter(pk=old.pk).delete()
            row = SandboxContainer.objects.create(tenant=target.tenant, key=target.key, **fields)
    except IntegrityError:  # another process recorded it at the same moment
        return
    events.publish(tenant=target.tenant, topic=TOPIC, type="sandbox.container.created", data=describe(row))
    if made:
        logger.info("sandbox container created", extra={"container": target.name, "scope": target.scope})


def touch(target: Target) -> None:
    from apps.sandbox.models import SandboxContainer

    SandboxContainer.objects.for_tenant(target.tenant).filter(key=target.key).update(
        last_used_at=timezone.now(), exec_count=F("exec_count") + 1
    )


def _remove_quietly(container_id: str) -> bool:
    """Remove a container (running or not); False when the engine failed to."""
    try:
        client().api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        return True
    except (SandboxUnavailable, *_ENGINE_ERRORS):
        logger.warning("sandbox: could not remove a container", exc_info=True)
        return False
    return True


def forget(name: str) -> None:
    _known.pop(name, None)


def describe(row: SandboxContainer) -> dict[str, Any]:
    """A container row as the API, the dashboard and live events show it."""
    return {
        "id": str(row.pk),
        "name": row.name,
        "scope": row.scope,
        "agent": row.agent.key if row.agent_id and row.agent else None,
        "session_key": row.session_key,
        "image": row.image,
        "workspace_access": row.workspace_access,
        "limits": row.limits,
        "created_at": row.created_at.isoformat(),
        "last_used_at": row.last_used_at.isoformat(),
        "exec_count": row.exec_count,
    }


def usage(row: SandboxContainer) -> dict[str, Any]:
    """The container's state and resource use as the engine reports it now."""
    try:
        api = client().api
        state = api.inspect_container(row.container_id)["State"]
        if not state.get("Running"):
            return {"state": state.get("Status", "stopped")}
        stats = api.stats(row.container_id, stream=False, one_shot=True)
    except docker.errors.NotFound:
        return {"state": "gone"}
    except (SandboxUnavailable, *_ENGINE_ERRORS):
        return {"state": "unknown"}
    memory = stats.get("memory_stats") or {}
    cpu = ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
    return {
        "state": "running",
        "memory_bytes": memory.get("usage"),
        "memory_limit_bytes": memory.get("limit"),
        "pids": (stats.get("pids_stats") or {}).get("current"),
        "cpu_seconds": round(cpu / 1e9, 2) if isinstance(cpu, int) else None,
    }


def remove(row: SandboxContainer, *, reason: str) -> bool:
    """Stop and remove a container and its row; False (row kept) when the engine failed to."""
    if not _remove_quietly(row.container_id):
        return False
    _drop_row(row, reason=reason)
    return True


def _drop_row(row: SandboxContainer, *, reason: str) -> None:
    """Forget a container whose engine side is gone: its row, this process's id, and a live event."""

    forget(row.name)
    data = {**describe(row), "reason": reason}
    row.delete()
    events.publish(tenant=row.tenant, topic=TOPIC, type="sandbox.container.removed", data=data)


def prune(now: Any = None) -> dict[str, int]:
    """Remove containers idle for ``TOOLGATE_SANDBOX_IDLE_HOURS``, older than
    ``TOOLGATE_SANDBOX_MAX_AGE_DAYS``, whose container is gone, and this installation's containers that
    have no row (after a grace period). Returns counts per reason."""
    from apps.sandbox.models import SandboxContainer

    now = now or timezone.now()
    idle_before = now - timedelta(hours=settings.TOOLGATE_SANDBOX_IDLE_HOURS)
    old_before = now - timedelta(days=settings.TOOLGATE_SANDBOX_MAX_AGE_DAYS)
    counts = {"idle": 0, "old": 0, "gone": 0, "orphan": 0}
    rows = SandboxContainer.objects.dangerously_all_tenants().select_related("tenant", "agent")
    for row in rows.filter(Q(last_used_at__lt=idle_before) | Q(created_at__lt=old_before)):
        reason = "old" if row.created_at < old_before else "idle"
        if remove(row, reason=reason):
            counts[reason] += 1
    try:
        listed = client().api.containers(all=True, filters={"label": [f"{LABEL_INSTANCE}={instance()}"]})
    except (SandboxUnavailable, *_ENGINE_ERRORS):
        logger.warning("sandbox prune: the engine cannot be reached; rows kept")
        return counts
    present = {str(c["Id"]) for c in listed}
    recorded = set()
    for row in SandboxContainer.objects.dangerously_all_tenants().select_related("tenant", "agent"):
        recorded.add(row.container_id)
        if row.container_id not in present and _vanished(row.container_id):
            _drop_row(row, reason="gone")
            counts["gone"] += 1
    for entry in listed:
        if str(entry["Id"]) in recorded:
            continue
        created = datetime.fromtimestamp(int(entry.get("Created", 0)), tz=UTC)
        if created < now - ORPHAN_GRACE and _remove_quietly(str(entry["Id"])):
            counts["orphan"] += 1
    return counts


def remove_tenant_containers(tenant: Any, *, reason: str) -> tuple[int, int]:
    """Remove every container of one tenant: its rows' and any of this installation's labelled with it
    (one whose row was lost). Returns (removed, left: the engine refused or could not be reached)."""
    from apps.sandbox.models import SandboxContainer

    removed = left = 0
    for row in SandboxContainer.objects.for_tenant(tenant).select_related("tenant", "agent"):
        if remove(row, reason=reason):
            removed += 1
        else:
            left += 1
    labels = [f"{LABEL_INSTANCE}={instance()}", f"{LABEL_TENANT}={tenant.pk}"]
    try:
        listed = client().api.containers(all=True, filters={"label": labels})
    except SandboxUnavailable:
        return removed, left  # no engine here: no container to remove
    except _ENGINE_ERRORS:
        # No engine answering: it runs none of them now; pruning removes any it still has once it is back.
        logger.warning("sandbox: the engine cannot be reached; the tenant's unrecorded containers are left")
        return removed, left
    for entry in listed:
        if _remove_quietly(str(entry["Id"])):
            removed += 1
        else:
            left += 1
    return removed, left


def _vanished(container_id: str) -> bool:
    """Whether the engine no longer has the container at all (asked by id: a container made under
    another installation label is not "gone"); an engine that fails to answer keeps the row."""
    try:
        client().api.inspect_container(container_id)
    except docker.errors.NotFound:
        return True
    except (SandboxUnavailable, *_ENGINE_ERRORS):
        return False
    return False


# --- running a command --------------------------------------------------------------------------------


@dataclass
class Outcome(RunOutcome):
    """What happened to a command in the sandbox: the host runner's outcome, and which container."""

    container: str = ""
    started_container: bool = False


def run(
    target: Target,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
) -> Outcome:
    """Run the program ``argv`` (no shell of ours: pass ``["sh", "-c", command]`` for one) in the
    target's container; raises :class:`SandboxUnavailable` when it cannot."""
    started = time.monotonic()
    made_before = target.name in _known
    container_id = ensure(target)
    try:
        outcome = _exec(container_id, argv, cwd=cwd, env=env, timeout=timeout, started=started)
    except _Gone:
        forget(target.name)
        container_id = ensure(target)
        outcome = _exec(container_id, argv, cwd=cwd, env=env, timeout=timeout, started=started)
    except _ENGINE_ERRORS as error:
        forget(target.name)
        raise SandboxUnavailable(_engine_reason(error)) from error
    outcome.container = target.name
    outcome.started_container = not made_before
    try:
        touch(target)
    except Exception:  # the command ran; a lost "last used" time must not turn it into an error
        logger.warning("sandbox: could not record the container's use", exc_info=True)
    return outcome


def _exec(
    container_id: str,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    started: float,
) -> Outcome:
    api = client().api
    token = secrets.token_hex(8)
    try:
        created = api.exec_create(
            container_id,
            ["sh", "-c", _WRAPPER, "toolgate-exec", token, *argv],
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            environment=dict(env),
            workdir=cwd,
            user=_run_as(),
        )
    except docker.errors.NotFound as error:
        raise _Gone from error
    except docker.errors.APIError as error:
        if error.status_code == 409:  # the container is not running
            raise _Gone from error
        raise
    exec_id = created["Id"]
    stdout, stderr = Capture(), Capture()
    failure: list[BaseException] = []

    def read() -> None:
        try:
            for out, err in api.exec_start(exec_id, stream=True, demux=True):
                if out:
                    stdout.add(out)
                if err:
                    stderr.add(err)
        except Exception as error:  # reported by the caller's thread
            failure.append(error)

    reader = threading.Thread(target=read, name="sandbox-exec", daemon=True)
    reader.start()
    reader.join(max(0.0, started + timeout - time.monotonic()))
    timed_out = reader.is_alive()
    if timed_out:
        _kill_exec(container_id, token, reader)
    if failure and not timed_out:
        raise failure[0]
    exit_code = None
    if not timed_out:
        exit_code = api.exec_inspect(exec_id).get("ExitCode")
    return Outcome(
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
    )


def _kill_exec(container_id: str, token: str, reader: threading.Thread) -> None:
    """Kill a timed-out command's process group from a second exec; if that does not end it within
    the grace period, kill the container (it is made again at the next call)."""
    api = client().api
    try:
        killer = api.exec_create(container_id, ["sh", "-c", _KILLER, "toolgate-kill", token], user=_run_as())
        api.exec_start(killer["Id"])
    except _ENGINE_ERRORS:
        logger.warning("sandbox: could not kill a timed-out command from inside", exc_info=True)
    reader.join(KILL_GRACE_SECONDS)
    if reader.is_alive():
        logger.warning("sandbox: a timed-out command survived; killing its container")
        _remove_quietly(container_id)
        for name, known in list(_known.items()):
            if known == container_id:
                forget(name)
        reader.join(KILL_GRACE_SECONDS)
