"""The program a warm jail runs (:mod:`apps.toolkit.warm_jails`): started inside the jail by Toolgate's own
Python with ``-I -S``, it runs one command at a time for Toolgate and puts the jail back as it found it.

It is its source, not an import, that runs (the project's code is not visible in a jail): the standard
library only, and nothing here is imported by Toolgate. The socket Toolgate talks over is the file
descriptor named by ``argv[1]``, a ``SOCK_SEQPACKET`` pair: one message per request and per answer.

* At start it makes itself non-dumpable, so the commands it runs (the same uid, every capability
  dropped) can neither trace it nor read its memory, its open files or its environment, and it notes
  what the jail's own file systems hold (the root and ``/dev``, both bubblewrap's tmpfs).
* A request is JSON (``argv``, ``cwd``, ``env``) with two descriptors, the write ends of the command's
  output pipes. The command is spawned (``posix_spawn``) in a new session with stdin on ``/dev/null``,
  the signals Python ignores restored, POSIX message queues refused (``RLIMIT_MSGQUEUE`` 0: they would
  outlive it in the jail's IPC namespace), and nothing else of the helper's open.
* When the command exits, whatever it left running gets :data:`DRAIN_SECONDS` to finish, then every
  process of the jail but the helper and bubblewrap's init is killed; ``/tmp`` and ``/dev/shm`` are
  emptied. Then the answer: the exit status (128 + the signal when killed by one, as bubblewrap reports
  it) and ``retire``, why the jail cannot be put back as it was ("" when it was: an entry added or
  changed on its own file systems, a System V IPC object, a process that would not die): Toolgate
  then ends this jail and makes a new one for the next command.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import socket
import sys
import time

DRAIN_SECONDS = 0.5
KILL_SECONDS = 2.0
MAX_REQUEST = 256 * 1024
PR_SET_DUMPABLE = 4
WIPED = ("/tmp", "/dev/shm")  # noqa: S108 - the jail's own tmpfs
SYSV = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")


def _processes() -> list[int]:
    """The jail's live processes but bubblewrap's init (1) and this one (zombies left out)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, me):
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[:1]
        except (OSError, IndexError):
            continue
        if state not in ([b"Z"], [b"X"]):
            found.append(int(entry))
    return found


def _stop_leftovers() -> bool:
    """Let what the command left running finish for a moment, then kill it; False when something
    would not die."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while _processes() and time.monotonic() < deadline:
        time.sleep(0.01)
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        left = _processes()
        if not left:
            return True
        if time.monotonic() >= deadline:
            return False
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


Entry = tuple[int, int, int, int, str]
MOUNT_POINT: Entry = (0, 0, 0, 0, "mount point")


def _tree(root: str) -> dict[str, Entry]:
    """Every entry under ``root`` on ``root``'s own file system with its inode, mode, owner and link
    target; mount points are listed but not entered (the system's read-only directories, /proc,
    /workspace …), nor, below ``root``, the directories that are emptied after each command."""
    found: dict[str, Entry] = {}
    device = os.lstat(root).st_dev
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            found[directory + "/?"] = (0, 0, 0, 0, "unreadable")
            continue
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if info.st_dev != device:
                found[entry.path] = MOUNT_POINT
                continue
            target = os.readlink(entry.path) if entry.is_symlink() else ""
            found[entry.path] = (info.st_ino, info.st_mode, info.st_uid, info.st_gid, target)
            if entry.is_dir(follow_symlinks=False) and entry.path not in WIPED:
                pending.append(entry.path)
    return found


State = tuple[dict[str, Entry], ...]


def _state() -> State:
    """What the jail's own file systems hold: its root, ``/dev`` and the emptied directories."""
    return tuple(_tree(root) if os.path.isdir(root) else {} for root in ("/", "/dev", *WIPED))


def _sysv_objects() -> bool:
    for path in SYSV:
        try:
            with open(path) as handle:
                if len(handle.read().splitlines()) > 1:  # a header, then one line per object
                    return True
        except OSError:
            continue
    return False


def _empty(directory: str, keep: dict[str, Entry]) -> bool:
    """Remove everything in ``directory`` but what it held when the jail was made (``keep``: mount
    points of directories bound under it, and their parents), never following a link; False when
    something stays."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for entry in entries:
        try:
            if entry.path in keep:
                inside = keep[entry.path] != MOUNT_POINT and entry.is_dir(follow_symlinks=False)
                if inside and not _empty(entry.path, keep):
                    return False
            elif entry.is_dir(follow_symlinks=False):
                _make_removable(entry.path)
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            return False
    return True


def _make_removable(top: str) -> None:
    """Give the jail's user back the rights a command took from its own directories under ``top``."""
    for directory, names, _files in os.walk(top, topdown=True, onerror=None, followlinks=False):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)


def _run(request: dict[str, object], out: int, err: int) -> int:
    """Run the command (``posix_spawn``: no copy of this process) and wait for its end; its status."""
    try:
        argv = [str(part) for part in request["argv"]]  # type: ignore[attr-defined]
        env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
        os.chdir(str(request["cwd"]))
        # Inside the jail already: the helper itself is the jail's program (apps.toolkit.warm_jails).
        pid = os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, err, 2),
            ],
            setsid=True,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT),
        )
    except (OSError, KeyError, TypeError, AttributeError) as error:
        os.write(err, f"jail: could not start the command: {error}\n".encode())
        return 127
    finally:
        os.close(out)
        os.close(err)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _restore(baseline: State, kept: dict[str, Entry]) -> str:
    """Put the jail back as it was after a command (``kept``: what the emptied directories held at the
    start): "" when done, else why it cannot be."""
    if not _stop_leftovers():
        return "a process would not die"
    if not all([_empty(directory, kept) for directory in WIPED]):
        return "a directory emptied after each command could not be emptied"
    if _sysv_objects():
        return "a System V IPC object was left"
    now = _state()
    if now != baseline:
        changed = {
            path
            for part, old in zip(now, baseline, strict=True)
            for path in {*part, *old}
            if part.get(path) != old.get(path)
        }
        return "changed: " + ", ".join(sorted(changed)[:5])
    return ""


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit(3)
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.set_inheritable(False)
    # POSIX message queues would outlive a command in the jail's IPC namespace: none at all.
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    baseline = _state()
    kept = {path: entry for part in baseline[2:] for path, entry in part.items()}
    sock.send(b'{"ready": true}')
    while True:
        try:
            data, fds, _flags, _address = socket.recv_fds(sock, MAX_REQUEST, 2)
        except OSError:
            return
        if not data:
            return  # Toolgate closed its end: the jail ends
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            sock.send(b'{"status": 127, "retire": true}')
            continue
        for fd in fds:
            os.set_inheritable(fd, False)
        status = _run(json.loads(data), fds[0], fds[1])
        sock.send(json.dumps({"status": status, "retire": _restore(baseline, kept)}).encode())


if __name__ == "__main__":
    main()
