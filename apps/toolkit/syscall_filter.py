"""The jail's system call filter: the kernel keyring and io_uring are refused.

* The kernel's keyrings are not namespaced the way a jail's other resources are. Every jail's process
  is the same user outside its namespace (Toolgate's), so without the filter a key one jail adds is
  listed, with its description, in every other jail's ``/proc/keys``, whatever the tenant: a channel
  between tenants, and a shared quota one tenant could use up. ``add_key``, ``keyctl`` and
  ``request_key`` fail with ``EPERM``, as under Docker's default profile, which refuses them for the
  same reason.
* io_uring (``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``) is a large part of the
  kernel that ordinary commands do not need and that has given unprivileged processes root more than
  once; Docker's default profile refuses it too. It fails with ``ENOSYS``, as on a kernel built
  without it, so programs that can use it (libuv, for one) fall back to ordinary system calls.

Every other call is allowed: the jail's namespaces, dropped capabilities and limits are the
confinement; this closes what they do not cover.

The filter is compiled by **libseccomp** (Debian's ``libseccomp2``, which apt itself needs) into a
classic BPF program, once per process, for the machine's own system call ABI and its compatibility ABIs
(i386 and x32 beside x86_64, arm beside aarch64), so a 32-bit program cannot go round it.
bubblewrap loads it (``--seccomp``) after setting ``PR_SET_NO_NEW_PRIVS``, before the jail's program
starts. The program is kept in a file under ``TOOLGATE_DATA_DIR`` (never visible in a jail), named by
its content, which the jail's trampoline opens for bubblewrap (:func:`apps.toolkit.jail.launch`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import os
import tempfile
import threading
from pathlib import Path

from django.conf import settings

# The refused system calls, and the error each gets.
REFUSED = {
    "add_key": errno.EPERM,
    "keyctl": errno.EPERM,
    "request_key": errno.EPERM,
    "io_uring_setup": errno.ENOSYS,
    "io_uring_enter": errno.ENOSYS,
    "io_uring_register": errno.ENOSYS,
}
# The ABIs a program of the machine's own may also use, by the native one (``uname -m``).
COMPAT_ABIS = {"x86_64": ("x86", "x32"), "aarch64": ("arm",)}
_ALLOW = 0x7FFF0000  # SCMP_ACT_ALLOW
_ERRNO = 0x00050000  # SCMP_ACT_ERRNO(0)

_lock = threading.Lock()
_built: dict[int, Path] = {}  # per process id: the program's file


class FilterUnavailable(Exception):
    """The filter cannot be built here (libseccomp missing or refusing): jails are not made without it."""


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as error:
        raise FilterUnavailable(
            f"libseccomp could not be loaded ({error}); install Debian's libseccomp2 package"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _check(result: int, what: str) -> None:
    if result < 0:
        raise FilterUnavailable(f"libseccomp refused to {what} ({os.strerror(-result)})")


def program() -> bytes:
    """The filter as bubblewrap reads it: a classic BPF program (``struct sock_filter`` entries)."""
    lib = _library()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise FilterUnavailable("libseccomp could not start a filter")
    try:
        for abi in COMPAT_ABIS.get(os.uname().machine, ()):
            token = lib.seccomp_arch_resolve_name(abi.encode())
            if token:
                _check(lib.seccomp_arch_add(ctx, token), f"add the {abi} ABI")
        for name, error in REFUSED.items():
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                raise FilterUnavailable(f"libseccomp does not know the system call {name}")
            _check(lib.seccomp_rule_add(ctx, _ERRNO | error, number, 0), f"refuse {name}")
        with tempfile.TemporaryFile() as out:
            _check(lib.seccomp_export_bpf(ctx, out.fileno()), "export the filter")
            out.seek(0)
            compiled = out.read()
    finally:
        lib.seccomp_release(ctx)
    if not compiled or len(compiled) % 8:
        raise FilterUnavailable("libseccomp exported no filter")
    return compiled


def path() -> Path:
    """This process's filter file (built on first use): ``TOOLGATE_DATA_DIR/jail-seccomp/<sha256>.bpf``,
    owned by Toolgate and read-only. Raises :class:`FilterUnavailable`."""
    with _lock:
        found = _built.get(os.getpid())
        if found is not None and found.is_file():
            return found
        compiled = program()
        directory = Path(settings.TOOLGATE_DATA_DIR) / "jail-seccomp"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = directory / f"{hashlib.sha256(compiled).hexdigest()[:32]}.bpf"
        if not (target.is_file() and target.read_bytes() == compiled):
            # Written whole under another name, then renamed: another process never reads half of it.
            fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(compiled)
                os.chmod(temporary, 0o400)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        _built[os.getpid()] = target
        return target
