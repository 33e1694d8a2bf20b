"""The jail: every process Toolgate starts on a tenant's behalf runs inside one (SPEC Part A, 2026-11-27).

A jail is a fresh set of Linux namespaces made by **bubblewrap** (``bwrap``, Debian's ``bubblewrap``),
started by Toolgate with an explicit argument list, never through a shell. Inside it:

* ``/workspace`` is the call's own workspace, bound read-write: the only writable directory that
  outlives the process. The working directory and ``HOME`` are inside it.
* ``/usr`` (with the ``/bin``, ``/lib`` … links or directories of the host) is bound read-only, and of
  ``/etc`` only the files programs need to run (:data:`ETC_ENTRIES`: users and groups, name resolution,
  the loader cache, certificates, time zone). ``/etc/shadow``, ``/etc/ssl/private`` and the like are
  not there. Toolgate's own Python (its prefixes outside ``/usr``) and the directories an operator
  lists in ``TOOLGATE_JAIL_RO_PATHS`` are bound read-only too, at their own paths.
* ``/tmp`` is a private, size-bounded tmpfs (``/var/tmp`` links to it); ``/dev`` is a minimal one;
  ``/proc`` belongs to a new pid namespace, so it shows the jail's own processes and nothing of
  Toolgate's (no ``/proc/<toolgate pid>/environ``).
* Not visible at all: ``TOOLGATE_DATA_DIR`` (the database, its socket, secret files), every other
  workspace, the Docker socket, the project's code, and Toolgate's environment (the process gets only
  the environment the caller builds for it).
* The process is uid and gid 65534 in a new user namespace, with every capability dropped, no new
  privileges (bubblewrap sets ``PR_SET_NO_NEW_PRIVS``), in a new session (no terminal injection), with
  new IPC and UTS namespaces, and it cannot make a user namespace of its own (``--disable-userns``).
* The kernel keyring, which is not namespaced like the rest, and io_uring are refused by a system call
  filter (:mod:`apps.toolkit.syscall_filter`), and ``/proc/keys`` and ``/proc/key-users`` cannot be
  read.
* The network is a new, empty namespace (loopback only, nothing listens) unless the caller turns it on;
  "on" shares the host's network: the process can open connections like Toolgate itself, to the
  internet and to services on the host's addresses.
* Limits: CPU seconds, address space, file size, open files and processes, set as hard limits by a
  fixed ``/bin/sh`` trampoline's ``ulimit`` before it becomes bubblewrap (``prlimit`` instead when the
  shell's ``ulimit`` is not the one verified at start-up). The process
  limit is ``RLIMIT_NPROC``, counted per jail (its own user namespace); when Toolgate itself runs as
  root the kernel does not apply that limit, so a ``pids`` cgroup per jail is used instead where one
  can be made (cgroup v1 or v2). The caller adds its wall-clock timeout and output caps
  (:func:`apps.toolkit.processes.run_process`).

When the process the jail was made for exits, the jail's pid namespace ends and takes every process
left in it along (a backgrounded ``sleep 1000 &`` never outlives its call).

An ``exec`` command may instead run in a jail kept from the previous command of its workspace, made the
same way, whose helper puts it back as new after each command (:mod:`apps.toolkit.warm_jails`).

When a jail cannot be made (bubblewrap missing, namespaces refused), :func:`check` raises
:class:`JailUnavailable` with a reason a person can act on, and the caller refuses the command: there
is no fallback to the host. :func:`status` tells ``/readyz`` and the dashboard why.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from apps.toolkit import syscall_filter
from apps.toolkit.processes import RunOutcome, run_process

logger = logging.getLogger(__name__)

WORKDIR = "/workspace"
UID = 65534  # "nobody": the jail's user inside its namespace
GID = 65534
HOSTNAME = "jail"
TMPFS_BYTES = 256 * 1024 * 1024  # the jail's /tmp (and /var/tmp, a link to it)
# The processes bubblewrap itself runs inside the jail's limit (its monitor and the namespace's init).
BWRAP_PROCESSES = 3
# The entries of /etc bound read-only when they exist: what programs need to run, and nothing that
# holds a secret (no shadow files, no private keys, no host-wide tool configuration).
ETC_ENTRIES = (
    "passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "services",
    "protocols", "networks", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "alternatives", "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "mime.types",
    "magic", "magic.mime", "os-release", "debian_version", "locale.alias", "terminfo", "inputrc",
)  # fmt: skip
# Of those, the ones the system may rewrite while Toolgate runs: their copies are refreshed whenever the
# original changes (checked before every jail). All are copied once per process into a directory of
# their own and bound as the jail's /etc in one mount (a mount per entry costs bubblewrap a fraction of
# a millisecond each, on every command).
ETC_LIVE = ("hosts", "resolv.conf", "ld.so.cache")
# Top-level directories that are links into /usr on merged-/usr systems, or directories of their own.
ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PROBE_RETRY_SECONDS = 30.0


class JailUnavailable(Exception):
    """A jail cannot be made here: the command is refused, never run on the host instead."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"jail unavailable: {reason} (will not fall back to unconfined host execution)")


@dataclass(frozen=True)
class Limits:
    """What one jailed process may use (each also bounds every process it starts)."""

    cpu_seconds: int = 300
    address_space_mb: int = 4096
    pids: int = 256
    file_size_mb: int = 1024
    open_files: int = 1024


@dataclass(frozen=True)
class Jail:
    """One jail: which host directory is ``/workspace``, whether the network is on, and the limits."""

    workspace: Path | None
    network: bool = False
    limits: Limits = Limits()

    def path_inside(self, host_path: Path) -> str:
        """``host_path`` (inside the workspace) as the jailed process sees it."""
        if self.workspace is None:
            return WORKDIR
        try:
            relative = Path(os.path.realpath(host_path)).relative_to(os.path.realpath(self.workspace))
        except ValueError:
            return WORKDIR
        return WORKDIR if str(relative) == "." else f"{WORKDIR}/{relative.as_posix()}"


@dataclass(frozen=True)
class Status:
    """Whether jails can be made in this process, and how the process limit is enforced."""

    available: bool
    reason: str = ""
    bwrap: str = ""
    version: str = ""
    pids_limit: str = ""  # "rlimit", "cgroup", or "" when it cannot be enforced here
    nproc_flag: str = ""  # /bin/sh's ulimit option for processes ("-u" or "-p"); "" to use prlimit

    def as_dict(self) -> dict[str, object]:
        return {
            "available": self.available,
            "reason": self.reason,
            "bwrap": self.bwrap,
            "version": self.version,
            "pids_limit": self.pids_limit or "not enforced",
            # A jail is only made with the filter (the probe builds it): available means filtered.
            "syscall_filter": ", ".join(syscall_filter.REFUSED) if self.available else "",
        }


# --- what is bound ------------------------------------------------------------------------------------


def read_only_paths() -> list[str]:
    """Directories bound read-only at their own paths besides the system's: Toolgate's Python (so MCP
    servers written against the installed SDK run) and ``TOOLGATE_JAIL_RO_PATHS``. Never anything
    under the data directory or the workspace root."""
    listed = (*settings.TOOLGATE_JAIL_RO_PATHS,)
    return list(_read_only_paths(listed, str(settings.TOOLGATE_DATA_DIR), _workspace_root()))


@functools.lru_cache(maxsize=8)
def _read_only_paths(listed: tuple[str, ...], data_dir: str, workspace_root: str) -> tuple[str, ...]:
    """:func:`read_only_paths` for one configuration, resolved once (every jail asks for it)."""
    candidates = [sys.prefix, sys.base_prefix, *listed]
    forbidden = [Path(os.path.realpath(data_dir)), Path(os.path.realpath(workspace_root))]
    result: list[str] = []
    for candidate in candidates:
        real = Path(os.path.realpath(candidate))
        if (
            str(real).startswith(("/usr/", "/etc/"))
            or str(real) in ("/", "/usr", "/etc")
            or not real.is_dir()
        ):
            continue
        if any(real == f or f.is_relative_to(real) or real.is_relative_to(f) for f in forbidden):
            logger.warning("jail: %s is not bound: it holds or is inside Toolgate's data", real)
            continue
        if str(real) not in result:
            result.append(str(real))
    return tuple(result)


def _workspace_root() -> str:
    return str(settings.TOOLGATE_WORKSPACE_ROOT)


_etc_lock = threading.Lock()
_etc_copy: tuple[int, Path] | None = None  # (the process that made it, the directory)
_etc_seen: dict[str, tuple[int, int, int]] = {}  # live entry -> (inode, size, mtime) of the copied file
_binds: tuple[int, Path | None, tuple[str, ...]] | None = None  # (process, its /etc copy, the arguments)


def _copy_entry(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, destination, symlinks=True)
    else:
        shutil.copy2(source, destination, follow_symlinks=False)


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _refresh_live(target: Path) -> None:
    """Copy again each of :data:`ETC_LIVE` that changed on the host since it was copied (a new file
    renamed into place, so a jail that is reading the old one keeps it whole)."""
    for entry in ETC_LIVE:
        source = Path("/etc") / entry
        key = _file_key(source)
        if key == _etc_seen.get(entry):
            continue
        destination = target / entry
        if key is None:
            destination.unlink(missing_ok=True)
        else:
            fresh = target / f".{entry}.new"
            shutil.copyfile(source, fresh)
            fresh.chmod(0o644)
            fresh.replace(destination)
        if key is None:
            _etc_seen.pop(entry, None)
        else:
            _etc_seen[entry] = key


def _jail_etc() -> Path | None:
    """This process's copy of the /etc entries of :data:`ETC_ENTRIES`, made on first use under
    ``TOOLGATE_DATA_DIR/jail-etc/<pid>/`` (with :data:`ETC_LIVE` copied again when they change); None
    when it cannot be made (the entries are then bound one by one)."""
    global _etc_copy
    with _etc_lock:
        if _etc_copy is not None and _etc_copy[0] == os.getpid():
            try:
                _refresh_live(_etc_copy[1])
                return _etc_copy[1]
            except OSError:
                logger.warning(
                    "jail: the copy of /etc could not be refreshed; it is made again", exc_info=True
                )
        parent = Path(settings.TOOLGATE_DATA_DIR) / "jail-etc"
        target = parent / str(os.getpid())
        try:
            parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            for old in parent.iterdir():  # copies of processes that are gone
                if old.name.isdigit() and not Path(f"/proc/{old.name}").exists():
                    shutil.rmtree(old, ignore_errors=True)
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(mode=0o755)
            _etc_seen.clear()
            for entry in ETC_ENTRIES:
                source = Path("/etc") / entry
                if entry not in ETC_LIVE and (source.exists() or source.is_symlink()):
                    _copy_entry(source, target / entry)
            _refresh_live(target)
        except OSError:
            logger.warning("jail: /etc could not be copied; its entries are bound one by one", exc_info=True)
            return None
        _etc_copy = (os.getpid(), target)
        return target


def _system_binds() -> list[str]:
    """The system's directories and /etc (worked out once per process; the /etc copy is kept fresh)."""
    global _binds
    etc = _jail_etc()
    if _binds is not None and _binds[0] == os.getpid() and _binds[1] == etc:
        return list(_binds[2])
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ROOT_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    if etc is not None:
        args += ["--ro-bind", str(etc), "/etc"]
    else:
        for entry in ETC_ENTRIES:
            args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    _binds = (os.getpid(), etc, tuple(args))
    return args


_KEY_LISTS = tuple(path for path in ("/proc/keys", "/proc/key-users") if os.path.exists(path))


def bwrap_args(jail: Jail, *, cwd: str, bwrap: str, seccomp_fd: int | None = None) -> list[str]:
    """bubblewrap's arguments for ``jail``, up to and including ``--``; ``seccomp_fd``: where bubblewrap
    reads the system call filter (:mod:`apps.toolkit.syscall_filter`) from, opened by the caller."""
    args = [
        bwrap,
        "--unshare-user", "--uid", str(UID), "--gid", str(GID),
        # No user namespace of its own inside the jail: they are how most of the kernel's privileged
        # code becomes reachable without privileges.
        "--disable-userns",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", HOSTNAME,
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]  # fmt: skip
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if not jail.network:
        args.append("--unshare-net")
    args += _system_binds()
    args += ["--proc", "/proc", "--dev", "/dev"]
    # The kernel's key lists are not the jail's own (the filter keeps a jail from adding keys; these
    # would still show the host's and count them per user): unreadable, as in Docker. A kernel without
    # keys has neither file (nor the calls the filter refuses).
    for keys in _KEY_LISTS:
        args += ["--ro-bind", "/dev/null", keys]
    args += ["--size", str(TMPFS_BYTES), "--tmpfs", "/tmp"]  # noqa: S108 - the jail's private tmpfs
    args += ["--symlink", "../tmp", "/var/tmp"]  # noqa: S108 - the same tmpfs, without a mount of its own
    # After the tmpfs mounts, so a listed directory under /tmp is not hidden by them.
    for path in read_only_paths():
        args += ["--ro-bind", path, path]
    if jail.workspace is not None:
        args += ["--bind", str(os.path.realpath(jail.workspace)), WORKDIR]
    else:
        args += ["--dir", WORKDIR]
    args += ["--chdir", cwd, "--"]
    return args


def _prlimit_args(limits: Limits, *, prlimit: str, use_nproc: bool) -> list[str]:
    mib = 1024 * 1024
    args = [
        prlimit,
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.address_space_mb * mib}",
        f"--fsize={limits.file_size_mb * mib}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]
    if use_nproc:
        args.append(f"--nproc={limits.pids + BWRAP_PROCESSES}")
    return [*args, "--"]


def _ulimit_script(limits: Limits, *, nproc_flag: str, use_nproc: bool) -> str:
    """The shell commands that set ``limits`` (hard and soft: ``ulimit`` without -H/-S sets both); only
    integers of Toolgate's own go into it. ``ulimit -f`` counts 512-byte blocks and ``-v`` KiB in every
    POSIX shell; :func:`_shell_nproc_flag` verified them on this machine."""
    commands = [
        f"ulimit -t {int(limits.cpu_seconds)}",
        f"ulimit -v {int(limits.address_space_mb) * 1024}",
        f"ulimit -f {int(limits.file_size_mb) * 2048}",
        f"ulimit -n {int(limits.open_files)}",
        "ulimit -c 0",
    ]
    if use_nproc:
        commands.append(f"ulimit {nproc_flag} {int(limits.pids) + BWRAP_PROCESSES}")
    return " && ".join(commands)


def _shell_nproc_flag() -> str:
    """The option of ``/bin/sh``'s ``ulimit`` for processes ("-u" in bash and busybox, "-p" in dash),
    once every limit it sets has been read back from ``/proc/self/limits``; "" when none works (the
    limits are then set with ``prlimit``)."""
    probe = Limits(cpu_seconds=7, address_space_mb=70, pids=96, file_size_mb=3, open_files=77)
    expected = {
        "Max cpu time": "7",
        "Max address space": str(70 * 1024 * 1024),
        "Max file size": str(3 * 1024 * 1024),
        "Max open files": "77",
        "Max core file size": "0",
        "Max processes": str(96 + BWRAP_PROCESSES),
    }
    cat = shutil.which("cat") or "/bin/cat"
    for flag in ("-u", "-p"):
        script = _ulimit_script(probe, nproc_flag=flag, use_nproc=True) + ' && exec "$0" /proc/self/limits'
        try:
            result = subprocess.run(  # Toolgate's own fixed script, no tenant input
                ["/bin/sh", "-c", script, cat], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        if result.returncode != 0:
            continue
        seen = {}
        for line in result.stdout.splitlines():
            for name in expected:
                if line.startswith(name + " "):
                    seen[name] = line[len(name) :].split()[:2]
        if all(seen.get(name) == [value, value] for name, value in expected.items()):
            return flag
    logger.info("jail: /bin/sh's ulimit could not be verified; limits are set with prlimit")
    return ""


# --- the process limit when Toolgate runs as root -----------------------------------------------------


class _PidsCgroups:
    """Per-jail ``pids`` cgroups (v1 or v2) under a directory of this process's own
    (``toolgate-jails/<pid>/``), or none.

    Making and removing a cgroup costs the kernel milliseconds, so a cgroup whose jail has ended (no
    process left in it) is kept and handed to the next jail; one that still holds processes is left
    alone until they are gone. Directories of processes that no longer exist are removed when a
    process starts using cgroups."""

    def __init__(self) -> None:
        self.base: Path | None = None
        self.version = 0
        self.idle: list[Path] = []
        self.busy: set[Path] = set()
        self.lock = threading.Lock()
        self.pid = 0

    def find(self) -> None:
        for finder in (self._v1, self._v2):
            try:
                base = finder()
            except OSError:
                base = None
            if base is not None:
                self._remove_dead(base)
                own = base / str(os.getpid())
                try:
                    own.mkdir(exist_ok=True)
                    if self.version == 2:
                        (own / "cgroup.subtree_control").write_text("+pids")
                except OSError:
                    continue
                self.base, self.pid, self.idle, self.busy = own, os.getpid(), [], set()
                return

    @staticmethod
    def _remove_dead(base: Path) -> None:
        for directory in base.iterdir():
            if not directory.name.isdigit() or Path(f"/proc/{directory.name}").exists():
                continue
            for child in directory.iterdir():
                if child.is_dir():
                    with contextlib.suppress(OSError):
                        child.rmdir()
            with contextlib.suppress(OSError):
                directory.rmdir()

    def _v1(self) -> Path | None:
        mount = None
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, extra = before.split(), after.split()
            if len(extra) >= 3 and extra[0] == "cgroup" and "pids" in extra[2].split(","):
                mount = Path(fields[4])
                break
        if mount is None:
            return None
        relative = ""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                relative = path.lstrip("/")
        base = mount / relative / "toolgate-jails"
        base.mkdir(exist_ok=True)
        probe = base / f"probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        try:
            (probe / "pids.max").write_text("10")
        finally:
            probe.rmdir()
        self.version = 1
        return base

    def _v2(self) -> Path | None:
        mount = None
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            if after.split()[:1] == ["cgroup2"]:
                mount = Path(before.split()[4])
                break
        if mount is None:
            return None
        relative = next(
            (
                line[3:].lstrip("/")
                for line in Path("/proc/self/cgroup").read_text().splitlines()
                if line[:3] == "0::"
            ),
            None,
        )
        if relative is None:
            return None
        parent = mount / relative
        if "pids" not in (parent / "cgroup.controllers").read_text().split():
            return None
        base = parent / "toolgate-jails"
        base.mkdir(exist_ok=True)
        (base / "cgroup.subtree_control").write_text("+pids")  # fails unless the parent delegates pids
        self.version = 2
        return base

    def acquire(self, pids: int) -> Path:
        """An empty cgroup limited to ``pids`` processes, for one jail."""
        if self.pid != os.getpid():  # a forked worker: cgroups of its own, never its parent's
            self.find()
        assert self.base is not None
        with self.lock:
            for group in list(self.busy):  # jails whose leftovers have died since
                if self._empty(group):
                    self.busy.discard(group)
                    self.idle.append(group)
            reused = self.idle.pop() if self.idle else None
        group = reused if reused is not None else self.base / uuid.uuid4().hex
        if reused is None:
            group.mkdir()
        (group / "pids.max").write_text(str(pids))
        return group

    def release(self, group: Path) -> None:
        """Hand ``group`` to the next jail once nothing runs in it."""
        with self.lock:
            (self.idle.append if self._empty(group) else self.busy.add)(group)

    @staticmethod
    def _empty(group: Path) -> bool:
        try:
            return not (group / "cgroup.procs").read_text().strip()
        except OSError:
            return False


# --- status -------------------------------------------------------------------------------------------

_lock = threading.Lock()
_status: Status | None = None
_checked_at = 0.0
_cgroups = _PidsCgroups()


def _probe() -> Status:
    bwrap = shutil.which(settings.TOOLGATE_BWRAP) or ""
    if not bwrap:
        return Status(
            False,
            f"bubblewrap ({settings.TOOLGATE_BWRAP}) is not installed; install Debian's bubblewrap package",
        )
    prlimit = shutil.which("prlimit") or ""
    if not prlimit:
        return Status(False, "prlimit (util-linux) is not installed", bwrap=bwrap)
    try:
        seccomp = str(syscall_filter.path())
    except (syscall_filter.FilterUnavailable, OSError) as error:
        return Status(False, f"the jail's system call filter could not be built: {error}", bwrap=bwrap)
    try:
        version = subprocess.run(  # Toolgate's own check of the tool, no tenant input
            [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        with open(seccomp, "rb") as program:
            # The jail itself, made once to see that namespaces are allowed and bubblewrap takes every
            # option (--disable-userns: bubblewrap 0.8) and the filter.
            probe = subprocess.run(
                [
                    *bwrap_args(Jail(workspace=None), cwd=WORKDIR, bwrap=bwrap, seccomp_fd=program.fileno()),
                    "/bin/sh",
                    "-c",
                    "exit 0",
                ],
                capture_output=True,
                text=True,
                timeout=20,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=(program.fileno(),),
                check=False,
            )
    except (OSError, subprocess.SubprocessError) as error:
        return Status(False, f"bubblewrap could not be started: {error}", bwrap=bwrap)
    if probe.returncode != 0:
        detail = (probe.stderr or "").strip().splitlines()[-1:] or [f"exit code {probe.returncode}"]
        return Status(
            False,
            f"bubblewrap cannot make a jail here ({detail[0][:300]}); user namespaces must be allowed "
            "(kernel.unprivileged_userns_clone, AppArmor) and bubblewrap (0.8 or later) must run",
            bwrap=bwrap,
            version=version,
        )
    pids = "rlimit"
    if os.geteuid() == 0:
        _cgroups.find()
        pids = "cgroup" if _cgroups.base is not None else ""
        if not pids:
            logger.warning(
                "jail: Toolgate runs as root and no pids cgroup can be made, so the jails' process limit "
                "is not enforced; run Toolgate as an unprivileged user or delegate a pids cgroup to it"
            )
    return Status(True, bwrap=bwrap, version=version, pids_limit=pids, nproc_flag=_shell_nproc_flag())


def status(*, refresh: bool = False) -> Status:
    """This process's jail status (probed once; a failure is probed again after 30 s)."""
    global _status, _checked_at
    with _lock:
        stale = _status is None or (
            not _status.available and time.monotonic() - _checked_at > _PROBE_RETRY_SECONDS
        )
        if refresh or stale:
            _status = _probe()
            _checked_at = time.monotonic()
        assert _status is not None
        return _status


def check() -> Status:
    """The status when jails can be made; raises :class:`JailUnavailable` otherwise."""
    current = status()
    if not current.available:
        raise JailUnavailable(current.reason)
    return current


# --- running ------------------------------------------------------------------------------------------


@dataclass
class Launch:
    """The argv that starts a program in a jail, and the cgroup to remove when it has ended."""

    argv: list[str]
    cgroup: Path | None = None

    def cleanup(self) -> None:
        if self.cgroup is not None:
            _cgroups.release(self.cgroup)


def launch(jail: Jail, argv: Sequence[str], *, cwd: str, passed_fds: Collection[int] = ()) -> Launch:
    """The argv that runs the program ``argv`` (no shell of ours) in ``jail`` with ``cwd`` (a path
    inside the jail); ``passed_fds``: the descriptors the caller passes on to the program. Raises
    :class:`JailUnavailable` when jails cannot be made here."""
    current = check()
    use_nproc = current.pids_limit == "rlimit"
    try:
        seccomp = str(syscall_filter.path())  # the probe's file, written again should it have gone
    except (syscall_filter.FilterUnavailable, OSError) as error:
        raise JailUnavailable(f"the jail's system call filter could not be built: {error}") from error
    # The trampoline opens the system call filter for bubblewrap on a descriptor the caller passes none on.
    seccomp_fd = next(fd for fd in range(3, 10) if fd not in passed_fds)
    jailed = [*bwrap_args(jail, cwd=cwd, bwrap=current.bwrap, seccomp_fd=seccomp_fd), *argv]
    group: Path | None = None
    if current.pids_limit == "cgroup":
        try:
            group = _cgroups.acquire(jail.limits.pids + BWRAP_PROCESSES)
        except OSError as error:
            raise JailUnavailable(
                f"the jail's process limit could not be set up ({error.strerror or error})"
            ) from error
    # Toolgate's own fixed trampoline (no tenant input in the script, only its integers): it moves
    # itself into the jail's pids cgroup, sets the limits, then becomes bubblewrap. It writes "0"
    # (itself), and on cgroup v1 to ``tasks``: moving the calling thread alone does not take the
    # kernel's lock over every thread group, which moving a process by pid does and which costs an RCU
    # grace period (about 10 ms a jail here). The shell has one thread, so the whole process moves.
    # It also opens the filter's file ("$1", Toolgate's own path) on that descriptor for bubblewrap.
    steps = [f'exec {seccomp_fd}<"$1"', "shift"]
    if group is not None:
        steps.append('echo 0 > "$0"')
    if current.nproc_flag:
        steps.append(_ulimit_script(jail.limits, nproc_flag=current.nproc_flag, use_nproc=use_nproc))
    else:
        prlimit = shutil.which("prlimit") or "prlimit"
        jailed = [*_prlimit_args(jail.limits, prlimit=prlimit, use_nproc=use_nproc), *jailed]
    target = "sh" if group is None else str(group / ("tasks" if _cgroups.version == 1 else "cgroup.procs"))
    script = " && ".join([*steps, 'exec "$@"'])
    return Launch(["/bin/sh", "-c", script, target, seccomp, *jailed], cgroup=group)


def run(
    jail: Jail,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
) -> RunOutcome:
    """Run the program ``argv`` in ``jail`` with the working directory ``cwd`` (a host path inside the
    workspace) and exactly the environment ``env``, within ``timeout`` seconds and the output caps of
    :func:`apps.toolkit.processes.run_process`. Raises :class:`JailUnavailable`."""
    started = launch(jail, argv, cwd=jail.path_inside(cwd))
    try:
        # The jailed process's host-side working directory does not matter (bubblewrap changes into
        # --chdir inside the jail); "/" keeps nothing of Toolgate's open.
        return run_process(started.argv, cwd=Path("/"), env=env, timeout=timeout)
    finally:
        started.cleanup()


def visible(path: str) -> bool:
    """Whether a host path (resolved) is visible in a jail: under the system's read-only directories
    or under one of :func:`read_only_paths`."""
    real = os.path.realpath(path)
    roots = [
        "/usr",
        *(f"/{name}" for name in ROOT_LINKS if not Path(f"/{name}").is_symlink()),
        *read_only_paths(),
    ]
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def stop_jails_under(root: Path) -> int:
    """Kill every jail on this host whose ``/workspace`` is ``root`` or lies under it (bubblewrap's own
    process: its jail's processes die with it, ``--die-with-parent`` and the pid namespace), whichever
    process started it. How many were killed. Used when a tenant is suspended or deleted: its commands
    and stdio MCP servers stop at once here; other hosts stop theirs by their own checks."""
    prefix = os.path.realpath(root).rstrip("/") + "/"
    found: dict[int, int] = {}  # bubblewrap's process -> its parent
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode(errors="replace") for part in handle.read().split(b"\0")]
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if not argv or os.path.basename(argv[0]) != "bwrap" or "--" not in argv:
            continue
        options = argv[: argv.index("--")]
        for index, option in enumerate(options[:-2]):
            if option == "--bind" and options[index + 2] == WORKDIR:
                if (options[index + 1].rstrip("/") + "/").startswith(prefix):
                    found[int(entry)] = parent
                break
    killed = 0
    # Each jail is bubblewrap's process outside and its init inside (a child with the same command
    # line): both are killed, the jail counted once.
    for pid, parent in found.items():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += parent not in found
    return killed
