"""Warm jails: a jail kept after a command for the next one of the same workspace, so that a short
command does not pay for bubblewrap's namespaces and mounts each time (README: Sandbox).

A warm jail is the jail of :mod:`apps.toolkit.jail`, made exactly as for one command (the same
``bwrap`` arguments, limits and process cgroup), whose program is Toolgate's helper
(:mod:`apps.toolkit.jail_helper`, run by Toolgate's own Python) instead of the command. The helper runs
one command at a time on Toolgate's request, over a socket pair no command can reach, and after each:

* kills every process the command left (after :data:`apps.toolkit.jail_helper.DRAIN_SECONDS`), so
  nothing outlives its call, as in a new jail;
* empties ``/tmp`` and ``/dev/shm``;
* checks that the jail's own file systems hold what they held when it was made and that no System V
  IPC object is left; otherwise the jail is ended and the next command gets a new one.

Which commands: only the ``exec`` tool's commands (``Placement.run(reuse=True)``), whose environment is
Toolgate's minimal one. Commands that carry a credential (credentialed CLIs), custom tools and stdio
MCP servers always get a jail of their own. A warm jail serves only the jail it was made for: the same
workspace (the same directory, not one made again at that path), network setting, limits and bound
directories; one command at a time; at most :data:`MAX_USES` commands and :data:`IDLE_SECONDS` idle.
``TOOLGATE_JAIL_WARM`` bounds how many a Toolgate process keeps (0: a new jail for every command).
A workspace's first command runs in a new jail of its own while its warm jail starts in the background
(a command arriving meanwhile waits for that start); when a warm jail cannot be had (the limit reached
by busy jails, the helper does not start), the command gets a new jail of its own, never the host.

A timeout, a suspension's stop or a jail that ends under its command ends the warm jail with everything
in it; ``jail.stop_jails_under`` finds warm jails like any other.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings

from apps.toolkit import jail as jails
from apps.toolkit.processes import SAFE_PATH, RunOutcome, supervise

logger = logging.getLogger(__name__)

IDLE_SECONDS = 60.0  # an idle warm jail is ended after this long
MAX_USES = 500  # … and any after this many commands
START_SECONDS = 10.0  # the helper's start, at most
REAP_SECONDS = 5.0
MAX_REQUEST_BYTES = 200 * 1024  # a larger command (argv and environment) gets a new jail
_HELPER = Path(__file__).with_name("jail_helper.py")


@functools.cache
def _helper_source() -> str:
    return _HELPER.read_text()


@dataclass(eq=False)
class _Warm:
    """One warm jail: bubblewrap with the helper in it, and Toolgate's end of their socket."""

    key: Hashable
    launch: jails.Launch
    process: subprocess.Popen[bytes]
    sock: socket.socket
    uses: int = 0
    idle_since: float = 0.0
    closed: bool = False

    def alive(self) -> bool:
        return not self.closed and self.process.poll() is None

    def close(self) -> None:
        """End the jail and every process in it (bubblewrap's own process: the pid namespace and all in
        it die with it)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.sock.close()
        self.launch.cleanup()


class _Command:
    """A command running in a warm jail, as :func:`apps.toolkit.processes.supervise` watches it."""

    def __init__(self, warm: _Warm, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.warm = warm
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.retire = ""  # why the jail is not to be used again, if it is not
        self._status: int | None = None

    @property
    def returncode(self) -> int | None:
        return self._status

    def _take(self, answer: bytes) -> None:
        if not answer:  # the jail ended under the command (killed from outside, or by the command)
            self.kill()
            return
        parsed = json.loads(answer)
        self._status = int(parsed["status"])
        self.retire = str(parsed.get("retire") or "")
        if self.retire:
            logger.info("jail: a warm jail is not used again: %s", self.retire[:300])

    def poll(self) -> int | None:
        if self._status is None:
            try:
                answer = self.warm.sock.recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            except OSError:
                answer = b""
            self._take(answer)
        return self._status

    def wait(self, timeout: float | None = None) -> int:
        if self._status is None:
            ready, _, _ = select.select([self.warm.sock], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired("jail", timeout or 0.0)
            try:
                answer = self.warm.sock.recv(4096)
            except OSError:
                answer = b""
            self._take(answer)
        assert self._status is not None
        return self._status

    def kill(self) -> None:
        self.warm.close()
        self.retire = "ended"
        if self._status is None:
            self._status = -signal.SIGKILL

    def leftovers(self) -> bool:
        return False  # the helper killed them before it answered

    def abort(self) -> None:
        self.kill()


class _Pool:
    """This process's warm jails: idle ones by key, how many exist, and the thread that starts them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.idle: dict[Hashable, list[_Warm]] = {}
        self.count = 0  # idle and busy
        self.failed: dict[Hashable, float] = {}  # key -> until when not to try again
        self.starting: dict[Hashable, concurrent.futures.Future[None]] = {}  # key -> its start
        self.reaper: threading.Thread | None = None
        # bubblewrap is told to die with the thread that started it; one long-lived thread starts them
        # all, so a warm jail does not end with whichever request's thread needed it first.
        self.starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolgate-warm-jail")

    def close_all(self) -> int:
        # The starts under way first (the starter runs them in order), so none is kept after this.
        with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
            self.starter.submit(lambda: None).result(timeout=2 * START_SECONDS)
        with self.lock:
            warm = [jail for stack in self.idle.values() for jail in stack]
            self.idle.clear()
            self.count -= len(warm)
        for jail in warm:
            jail.close()
        return len(warm)


_pool_lock = threading.Lock()
_pool: _Pool | None = None


def _here() -> _Pool:
    """This process's pool (a forked process gets one of its own, never its parent's jails)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Pool()
        return _pool


def close_all() -> int:
    """End every idle warm jail of this process; how many."""
    return _here().close_all() if _pool is not None else 0


atexit.register(close_all)


def _start(jail: jails.Jail, key: Hashable) -> _Warm | None:
    """A new warm jail for ``jail``, its helper ready; None when it cannot be had."""
    python = os.path.realpath(sys.executable)
    if not jails.visible(python):
        logger.info("jail: Toolgate's Python (%s) is not visible in a jail; no warm jails", python)
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # The helper counts against the jail's process limit: one more, so the command keeps all of its own.
    helper = dataclasses.replace(jail, limits=dataclasses.replace(jail.limits, pids=jail.limits.pids + 1))
    try:
        launch = jails.launch(
            helper,
            [python, "-I", "-S", "-c", _helper_source(), str(theirs.fileno())],
            cwd=jails.WORKDIR,
            passed_fds=(theirs.fileno(),),
        )
    except jails.JailUnavailable:
        ours.close()
        theirs.close()
        return None
    try:
        # The jail itself (jails.launch: limits, cgroup, bubblewrap) with the helper as its program: no
        # tenant input, and every command the helper starts runs inside it.
        process = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            cwd="/",
            env={"PATH": SAFE_PATH},
            start_new_session=True,
        )
    except OSError:
        logger.warning("jail: a warm jail could not be started", exc_info=True)
        ours.close()
        launch.cleanup()
        return None
    finally:
        theirs.close()
    warm = _Warm(key, launch, process, ours)
    ready, _, _ = select.select([ours], [], [], START_SECONDS)
    answer = b""
    if ready:
        with contextlib.suppress(OSError):
            answer = ours.recv(64)
    if answer != b'{"ready": true}':
        logger.warning("jail: a warm jail's helper did not start (exit %s)", process.poll())
        warm.close()
        return None
    return warm


def _take(pool: _Pool, jail: jails.Jail, key: Hashable, limit: int) -> _Warm | None:
    """An idle warm jail for ``key``, or None. A jail being started for ``key`` is waited for (at most
    :data:`START_SECONDS`); when there is none, one is started in the background for the next command
    (room made by ending the jail idle the longest, of another workspace or setting) and this command
    gets a new jail of its own, so a workspace's first command does not wait for a helper's start."""
    for _attempt in range(2):
        evicted: list[_Warm] = []
        pending: concurrent.futures.Future[None] | None = None
        with pool.lock:
            stack = pool.idle.get(key, [])
            while stack:
                warm = stack.pop()
                if warm.alive():
                    return warm
                pool.count -= 1
                evicted.append(warm)
            pending = pool.starting.get(key)
            start = pending is None and pool.failed.get(key, 0.0) <= time.monotonic()
            if start and pool.count >= limit:
                candidates = [(w.idle_since, k) for k, s in pool.idle.items() for w in s[:1]]
                start = bool(candidates)
                if start:
                    oldest = min(candidates, key=lambda item: item[0])[1]
                    evicted.append(pool.idle[oldest].pop(0))
                    pool.count -= 1
            if start:
                pool.count += 1  # the new one, reserved while it starts
                pool.starting[key] = pool.starter.submit(_start_kept, pool, jail, key)
        for warm in evicted:
            warm.close()
        if pending is None:
            return None
        with contextlib.suppress(concurrent.futures.TimeoutError):
            pending.result(timeout=START_SECONDS)
    return None


def _start_kept(pool: _Pool, jail: jails.Jail, key: Hashable) -> None:
    """Start a warm jail for ``key`` (on the pool's starter thread) and keep it idle for the next
    command; after a failure, none is tried for ``key`` for :data:`IDLE_SECONDS`."""
    try:
        started = _start(jail, key)
    except Exception:  # an unexpected failure costs the workspace its warm jail, never the pool its room
        logger.exception("jail: a warm jail could not be started")
        started = None
    with pool.lock:
        pool.starting.pop(key, None)
        if started is None:
            pool.count -= 1
            pool.failed[key] = time.monotonic() + IDLE_SECONDS
            return
    _keep(pool, started)


def _give(pool: _Pool, warm: _Warm, *, retire: bool) -> None:
    """Keep ``warm`` for the next command, or end it."""
    warm.uses += 1
    if retire or warm.uses >= MAX_USES or not warm.alive():
        warm.close()
        with pool.lock:
            pool.count -= 1
        return
    _keep(pool, warm)


def _keep(pool: _Pool, warm: _Warm) -> None:
    warm.idle_since = time.monotonic()
    with pool.lock:
        pool.idle.setdefault(warm.key, []).append(warm)
        if pool.reaper is None:
            pool.reaper = threading.Thread(
                target=_reap, args=(pool,), name="toolgate-warm-jail-reaper", daemon=True
            )
            pool.reaper.start()


def _reap(pool: _Pool) -> None:
    """End idle warm jails after :data:`IDLE_SECONDS`; stops when the pool has none left."""
    while True:
        time.sleep(REAP_SECONDS)
        now = time.monotonic()
        expired: list[_Warm] = []
        with pool.lock:
            for key, stack in list(pool.idle.items()):
                keep = [warm for warm in stack if now - warm.idle_since < IDLE_SECONDS and warm.alive()]
                expired += [warm for warm in stack if warm not in keep]
                if keep:
                    pool.idle[key] = keep
                else:
                    del pool.idle[key]
            pool.count -= len(expired)
            done = pool.count == 0
            if done:
                pool.reaper = None
        for warm in expired:
            warm.close()
        if done:
            return


def run(
    jail: jails.Jail, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> RunOutcome | None:
    """Run ``argv`` in a warm jail for ``jail`` (see the module doc) like :func:`apps.toolkit.jail.run`;
    None when no warm jail can be had (the caller then makes a jail for this command alone). Raises
    :class:`apps.toolkit.jail.JailUnavailable` when no jail can be made here at all."""
    limit = settings.TOOLGATE_JAIL_WARM
    if limit <= 0 or jail.workspace is None:
        return None
    current = jails.check()
    request = json.dumps({"argv": list(argv), "cwd": jail.path_inside(cwd), "env": dict(env)}).encode()
    if len(request) > MAX_REQUEST_BYTES:
        return None
    try:
        directory = os.stat(jail.workspace)
    except OSError:
        return None
    # Everything a jail is made of: its bubblewrap arguments (the workspace's path, network, bound
    # directories, the /etc copy), its limits, and the workspace directory itself (one made again at
    # the same path is another). Its system call filter is the same for every jail of a process.
    bwrap = tuple(jails.bwrap_args(jail, cwd=jails.WORKDIR, bwrap=current.bwrap))
    key = (bwrap, jail.limits, directory.st_dev, directory.st_ino, current.pids_limit, current.nproc_flag)
    pool = _here()
    warm = _take(pool, jail, key, limit)
    if warm is None:
        return None
    reused = warm.uses > 0
    started = time.monotonic()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        socket.send_fds(warm.sock, [request], [out_write, err_write])
    except OSError:
        for fd in (out_read, err_read):
            os.close(fd)
        _give(pool, warm, retire=True)
        return None
    finally:
        os.close(out_write)
        os.close(err_write)
    command = _Command(warm, open(out_read, "rb", buffering=0), open(err_read, "rb", buffering=0))  # noqa: SIM115
    try:
        outcome = supervise(command, started=started, timeout=timeout)
    finally:
        _give(pool, warm, retire=bool(command.retire))
    outcome.reused_jail = reused
    return outcome
