"""Per tenant / agent / user workspaces, and the one path resolver every filesystem tool goes through.

Layout under ``settings.TOOLGATE_WORKSPACE_ROOT``::

    tenants/<tenant uuid>/agents/<agent uuid>/workspace/            agent-level workspace
    tenants/<tenant uuid>/agents/<agent uuid>/users/<safe user>/    an OPEN agent's per-user workspace

Ids, never slugs: a renamed slug must not move a workspace, and a slug freed by one tenant and taken
by another must never hand over the first tenant's files. The agent-level workspace is a sibling of
``users/`` rather than its parent, so an OPEN agent called without a user id cannot read every user's
files.

:func:`resolve_path` implements SPEC B §8 (upstream ``resolvePath`` with restrict always on) plus Nebo's
sensitive paths (seed 003) and PathDenyable prefixes. It checks a path *before* use; the ``open_*``
helpers then open the checked path component by component with ``O_NOFOLLOW``, so a symlink swapped in
between check and use (an agent with ``exec`` can create one at any time) is refused instead of
followed.

The file tools share what sits on top of it: the built-in denied prefixes per tool
(:data:`DEFAULT_DENIED_PREFIXES`), the extensions ``read_file`` refuses (:data:`BINARY_EXTENSIONS`), the
atomic replacement of a file (:func:`write_atomically`) and a command's working directory
(:func:`resolve_cwd`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.context import CallContext

DIR_MODE = 0o700
FILE_MODE = 0o600
AGENT_DIR = "workspace"
USERS_DIR = "users"
MAX_PATH_BYTES = 4096  # Linux PATH_MAX
MAX_NAME_BYTES = 255  # Linux NAME_MAX

# Credential stores and shell start-up files (seed 003 "Sensitive path blocking", read and write). They
# are refused *inside* the workspace too: a workspace is mounted as the sandbox's working directory and
# often serves as HOME, so a `.ssh/` or `.bashrc` there is as sensitive as in a real home directory.
# Each entry is a sequence of path components matched anywhere in the workspace-relative path,
# after NFKC normalisation and case folding (case-insensitive file systems, full-width look-alikes).
SENSITIVE_PATHS: tuple[tuple[str, ...], ...] = (
    (".ssh",),
    (".aws",),
    (".gnupg",),
    (".azure",),
    (".config", "gcloud"),
    (".docker", "config.json"),
    (".kube", "config"),
    (".npmrc",),
    (".password-store",),
    ("library", "keychains"),
    # Browser profiles (cookies, saved passwords).
    (".mozilla",),
    (".config", "google-chrome"),
    (".config", "chromium"),
    (".config", "bravesoftware"),
    (".config", "microsoft-edge"),
    ("library", "application support", "google", "chrome"),
    ("library", "application support", "firefox"),
    ("appdata", "local", "google", "chrome", "user data"),
    ("appdata", "roaming", "mozilla", "firefox"),
    # Shell rc files: writing one is code execution at the next login shell.
    (".bashrc",),
    (".zshrc",),
    (".bash_profile",),
    (".zprofile",),
    (".profile",),
    # Toolgate additions: the other common plain-text credential files.
    (".netrc",),
    (".git-credentials",),
    (".pgpass",),
)

# Characters no legitimate file name an agent needs contains: control characters (NUL truncates paths
# in C, newlines forge tool output) and bidi / zero-width marks (make a path read differently from
# what it is).
_INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u200e\u200f"  # zero-width space/joiners, LRM/RLM
    "\u202a\u202b\u202c\u202d\u202e"  # bidi embeddings and overrides
    "\u2066\u2067\u2068\u2069\ufeff"  # bidi isolates, BOM
)

_HINT = "Use a path relative to your workspace, e.g. 'notes/todo.md'."

# SPEC B §8: read_file rejects these extensions outright.
BINARY_EXTENSIONS = frozenset(
    {
        *("jpg", "jpeg", "png", "gif", "webp", "bmp", "ico", "tiff", "tif"),
        *("mp3", "wav", "ogg", "flac", "aac", "m4a", "mp4", "avi", "mov", "mkv", "webm"),
        *("zip", "tar", "gz", "bz2", "7z", "rar", "pdf", "docx", "xlsx", "pptx", "exe", "dll", "so", "dylib"),
    }
)

# PathDenyable (SPEC B §8): upstream's lists without GoClaw's own files (config.json, goclaw.db: Toolgate
# keeps no state in workspaces), plus `.git/` at every depth (`**/.git/`: `sub/.git/config` too) for the
# tools that change or enumerate files: an agent rewriting .git/hooks or .git/config, or planting a
# repository in a sub-directory, gets code run by the next git command there. read_file keeps `.media/`
# and `.uploads/` readable, as upstream. search and glob read what read_file reads, so they share its
# list. A tenant's or agent's `denied_prefixes` setting adds to these, never removes from them.
_WRITE_DENIED = ("**/.git/", "memory/", ".media/", ".uploads/", "delegate/")
_READ_DENIED = ("memory/",)
DEFAULT_DENIED_PREFIXES: dict[str, tuple[str, ...]] = {
    "read_file": _READ_DENIED,
    "search": _READ_DENIED,
    "glob": _READ_DENIED,
    "write_file": _WRITE_DENIED,
    "edit": _WRITE_DENIED,
    "list_files": _WRITE_DENIED,
}


class PathError(Exception):
    """A path a tool may not use. ``str(error)`` is written for the LLM: what is wrong, what to do.

    Messages name the path as the caller wrote it, never the host path (that would leak the server's
    directory layout, tenant ids included)."""


# --- workspaces ---------------------------------------------------------------------------------------


DISK_FULL = (
    "no space is left on the workspace's disk: delete files you no longer need from the workspace, or "
    "ask an administrator for more space."
)


def disk_full(error: OSError) -> bool:
    """Whether ``error`` says the disk (or the quota) under the workspace is full."""
    return error.errno in (errno.ENOSPC, errno.EDQUOT)


def workspace_root() -> Path:
    """The directory holding every tenant's workspaces (``settings.TOOLGATE_WORKSPACE_ROOT``)."""
    return Path(settings.TOOLGATE_WORKSPACE_ROOT)


def safe_user_dir(user_id: str) -> str:
    """A directory name for an API-client supplied user id.

    A readable, strictly sanitised prefix (only ``[A-Za-z0-9_-]``, so never ``.``, ``..`` or a
    separator) followed by a SHA-256 digest of the exact id: sanitising alone would map ``a/b`` and
    ``a_b`` to one directory, the digest keeps every distinct id distinct."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", user_id).strip("-_")[:32]
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{readable}-{digest}" if readable else digest


def workspace_for(*, tenant: Tenant, agent: Agent, user_id: str) -> Path:
    """The workspace of one call, created on demand (directories mode 0700).

    OPEN agents with a user id get a per-user workspace (seed 000: open agents are per-user);
    PREDEFINED agents, and OPEN agents called without a user id, the agent-level one."""
    if agent.tenant_id != tenant.pk:
        # Defence in depth: a mismatched pair would put one tenant's agent in another's tree.
        raise ValueError("workspace_for: the agent belongs to another tenant")
    parts = ["tenants", str(tenant.pk), "agents", str(agent.pk)]
    if agent.type == "open" and user_id:
        parts += [USERS_DIR, safe_user_dir(user_id)]
    else:
        parts.append(AGENT_DIR)
    return _make_private_dirs(workspace_root(), parts)


def _make_private_dirs(root: Path, parts: Sequence[str]) -> Path:
    """``root``/``parts``, each component made when missing (mode 0700, exactly) and checked to be a
    directory, never a symlink. A workspace that exists costs one ``lstat`` per component (every call
    asks for its workspace)."""
    current = _real_root(root)
    for part in parts:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            try:
                os.mkdir(current, DIR_MODE)
            except FileExistsError:
                pass
            else:
                os.chmod(current, DIR_MODE)  # mkdir's mode is narrowed by the umask, never widened
            mode = os.lstat(current).st_mode
        # Nothing below the root may be a symlink: that would point a tenant's workspace elsewhere.
        if not stat.S_ISDIR(mode):
            raise PathError(f"workspace component {part!r} is not a directory")
    return Path(current)


def _real_root(root: Path) -> str:
    """The root's real path, the root made first when missing (checked each time: it is one ``stat``)."""
    text = str(root)
    real = _REAL_ROOTS.get(text)
    if real is None or not os.path.isdir(real):
        root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        real = _REAL_ROOTS[text] = os.path.realpath(root)
    return real


_REAL_ROOTS: dict[str, str] = {}


# --- path resolution ----------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Compare names the way the most permissive file system would: NFKC and case folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def _inside(child: str, parent: str) -> bool:
    """``child`` equals ``parent`` or lies below it (a prefix followed by a separator, so that
    ``/ws-evil`` is not inside ``/ws``)."""
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def _check_text(path: str) -> None:
    if "\x00" in path:
        raise PathError("invalid path: it contains a NUL byte. " + _HINT)
    if any(unicodedata.category(ch) == "Cc" or ch in _INVISIBLE for ch in path):
        raise PathError(
            "invalid path: it contains control or invisible (bidi / zero-width) characters. "
            "Type the path in plain characters."
        )
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise PathError("invalid path: it is not valid UTF-8 text.") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise PathError(f"invalid path: longer than {MAX_PATH_BYTES} bytes. Use a shorter path.")
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in path.split("/")):
        raise PathError(f"invalid path: a name in it is longer than {MAX_NAME_BYTES} bytes.")
    if path == "~" or path.startswith("~/"):
        raise PathError(
            "invalid path: '~' (a home directory) is not available; your workspace is the only "
            "directory you can use. " + _HINT
        )


ANY_DEPTH = "**/"


def normalise_prefixes(prefixes: Iterable[str]) -> tuple[str, ...]:
    """Denied prefixes as folded workspace-relative strings: ``./.git/`` → ``.git``. A prefix written
    ``**/name/`` keeps its ``**/`` (see :func:`denied_match`): ``**/.git/`` → ``**/.git``."""
    result: list[str] = []
    for prefix in prefixes:
        text = prefix.strip()
        any_depth = text.startswith(ANY_DEPTH)
        cleaned = os.path.normpath("/" + (text[len(ANY_DEPTH) :] if any_depth else text)).lstrip("/")
        if cleaned and cleaned != ".":
            result.append((ANY_DEPTH if any_depth else "") + _fold(cleaned))
    return tuple(result)


def sensitive_match(relative_parts: Sequence[str]) -> str | None:
    """The sensitive entry (``.ssh``, ``.kube/config``…) found in these workspace-relative components."""
    folded = [_fold(part) for part in relative_parts]
    for entry in SENSITIVE_PATHS:
        size = len(entry)
        for start in range(len(folded) - size + 1):
            if tuple(folded[start : start + size]) == entry:
                return "/".join(entry)
    return None


def denied_match(relative_parts: Sequence[str], prefixes: Sequence[str]) -> str | None:
    """The denied prefix (already normalised) that covers this workspace-relative path, if any.

    A prefix starting with ``**/`` covers its path at every depth: ``**/.git`` denies ``.git/config``,
    ``sub/.git`` and ``a/b/.git/hooks/x`` (a repository planted in a sub-directory is as dangerous as
    one at the top: ``cd sub && git log`` runs its hooks and configured programs)."""
    if not relative_parts:
        return None
    folded_parts = [_fold(part) for part in relative_parts]
    folded = "/".join(folded_parts)
    for prefix in prefixes:
        if prefix.startswith(ANY_DEPTH):
            rest = prefix[len(ANY_DEPTH) :]
            if any(_inside("/".join(folded_parts[start:]), rest) for start in range(len(folded_parts))):
                return prefix
        elif _inside(folded, prefix):
            return prefix
    return None


def is_hidden(relative_parts: Sequence[str], prefixes: Sequence[str]) -> bool:
    """Whether a listing should omit this entry (sensitive or under a denied prefix)."""
    return sensitive_match(relative_parts) is not None or denied_match(relative_parts, prefixes) is not None


def real_workspace(workspace: Path) -> Path:
    """The canonical workspace directory (it must exist: the pipeline creates it)."""
    try:
        real = Path(os.path.realpath(workspace, strict=True))
    except OSError:
        raise PathError("the workspace is not available; try again later.") from None
    if not real.is_dir():
        raise PathError("the workspace is not available; try again later.")
    return real


def resolve_path(path: str, *, workspace: Path, denied_prefixes: Sequence[str] = ()) -> Path:
    """Resolve a tool's ``path`` argument to a canonical host path inside ``workspace``.

    SPEC B §8 with restrict always on: relative paths are joined with the workspace, absolute ones are
    accepted only inside it; the result is cleaned, then walked component by component from the
    canonical workspace. Refused (``PathError``):

    * escapes: ``..`` past the root, absolute paths elsewhere, symlinks resolving outside, broken
      symlinks whose target is outside, symlink loops;
    * any symlink component inside the workspace, even one pointing inside ("mutable symlink
      component": the agent can re-point it between this check and the use);
    * hardlinked files (``st_nlink > 1`` on a non-directory): the other name may be outside the
      workspace, and a write would change that file too;
    * Nebo's sensitive paths (:data:`SENSITIVE_PATHS`) and the tool's ``denied_prefixes``;
    * NUL, control and invisible characters, over-long paths, ``~``.

    A non-existent target is resolved through its deepest existing ancestor, so the missing rest
    cannot hide a symlink. The returned path has no symlink components at the time of the check;
    open it with :func:`open_parent` / :func:`open_read` to keep it that way at the time of use.
    """
    if not isinstance(path, str):
        raise PathError("invalid path: expected a string. " + _HINT)
    _check_text(path)
    ws_real = real_workspace(workspace)
    given = path or "."

    if os.path.isabs(given):
        candidate = os.path.normpath(given)
        # Accept the workspace as it was configured as well as canonicalised (/tmp vs /private/tmp).
        configured = os.path.normpath(os.path.abspath(workspace))
        if _inside(candidate, configured) and not _inside(candidate, str(ws_real)):
            candidate = str(ws_real) + candidate[len(configured) :]
    else:
        candidate = os.path.normpath(os.path.join(ws_real, given))
    if not _inside(candidate, str(ws_real)):
        raise PathError(f"access denied: path outside workspace: {path!r}. " + _HINT)

    relative = [part for part in candidate[len(str(ws_real)) :].split(os.sep) if part]
    current = str(ws_real)
    for index, part in enumerate(relative):
        shown = "/".join(relative[: index + 1])
        following = os.path.join(current, part)
        try:
            info = os.lstat(following)
        except FileNotFoundError:
            break  # the rest does not exist yet: `current` is the deepest existing (canonical) ancestor
        except NotADirectoryError:
            raise PathError(
                f"invalid path {path!r}: {'/'.join(relative[:index])!r} is a file, not a directory."
            ) from None
        except OSError as error:
            raise PathError(f"access denied: cannot resolve path {path!r} ({error.strerror}).") from None
        if stat.S_ISLNK(info.st_mode):
            _refuse_symlink(following, ws_real, path, shown)
        current = following

    # Policy checks run on the canonical relative path (no symlinks remain in it), so an alias can't
    # dodge them.
    sensitive = sensitive_match(relative)
    if sensitive is not None:
        raise PathError(
            f"access denied: {path!r} is a sensitive path ({sensitive}: credentials or shell start-up "
            "files) and is never readable or writable by tools."
        )
    denied = denied_match(relative, normalise_prefixes(denied_prefixes))
    if denied is not None:
        raise PathError(f"access denied: path {path!r} is restricted ({denied}/ is off limits to this tool).")

    resolved = Path(candidate)
    try:
        info = os.lstat(resolved)
    except OSError:
        return resolved  # does not exist (yet): writes create it through open_parent
    if not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1:
        raise PathError(
            f"access denied: {path!r} is a hardlinked file (link count {info.st_nlink}); its other name "
            "may be outside the workspace, so tools refuse it. Copy its content to a new file instead."
        )
    return resolved


def _refuse_symlink(link: str, ws_real: Path, path: str, shown: str) -> None:
    """Every symlink component is refused; the message says why (escape, broken, loop or mutable)."""
    try:
        os.stat(link)  # follows the whole chain
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PathError(f"access denied: {path!r} contains a symlink loop at {shown!r}.") from None
        target = os.path.realpath(link)  # non-strict: where the chain would lead once created
        if not _inside(target, str(ws_real)):
            raise PathError(
                f"access denied: {path!r}: broken symlink target outside workspace (at {shown!r})."
            ) from None
        raise PathError(
            f"access denied: {path!r} contains a broken symlink ({shown!r}); use the real path instead."
        ) from None
    if not _inside(os.path.realpath(link), str(ws_real)):
        raise PathError(f"access denied: path outside workspace: {path!r} (via the symlink {shown!r}).")
    raise PathError(
        f"access denied: {path!r}: path contains mutable symlink component {shown!r}; "
        "use the path it points to instead."
    )


def relative_to_workspace(resolved: Path, workspace: Path) -> str:
    """How to show a resolved path to the LLM: relative to the workspace (``.`` for the root)."""
    relative = os.path.relpath(resolved, real_workspace(workspace))
    return "." if relative == "." else relative


# --- opening without following symlinks ---------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_parent(resolved: Path, *, workspace: Path, create: bool = False) -> tuple[int, str]:
    """Open the parent directory of a path returned by :func:`resolve_path` and return ``(dir_fd,
    name)``; the caller opens ``name`` with ``dir_fd`` and ``O_NOFOLLOW`` and closes ``dir_fd``.

    Each component is opened with ``O_NOFOLLOW`` relative to the previous one, starting from the
    canonical workspace, so a directory swapped for a symlink after :func:`resolve_path` ran makes this
    fail (ELOOP / ENOTDIR) instead of leaving the workspace. ``create`` makes missing directories
    (mode 0700) on the way, as write_file's "parents created" requires."""
    ws_real = real_workspace(workspace)
    relative = os.path.relpath(resolved, ws_real)
    if relative == "." or relative.startswith(".."):
        raise PathError("invalid path: this needs a file name inside the workspace.")
    *parents, name = relative.split(os.sep)
    dir_fd = os.open(ws_real, _DIR_FLAGS)
    try:
        for part in parents:
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                if not create:
                    raise
                # Created concurrently is fine: the O_NOFOLLOW open below still checks what it is.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, DIR_MODE, dir_fd=dir_fd)
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
    except OSError as error:
        os.close(dir_fd)
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathError("access denied: path contains mutable symlink component.") from None
        raise
    return dir_fd, name


def open_read(resolved: Path, *, workspace: Path) -> int:
    """Open a resolved regular file for reading, refusing symlinks, hardlinks and special files
    (a FIFO would block the worker: hence ``O_NONBLOCK``, checked with fstat before any read)."""
    dir_fd, name = open_parent(resolved, workspace=workspace)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PathError("access denied: path contains mutable symlink component.") from None
        raise
    finally:
        os.close(dir_fd)
    try:
        check_open_file(fd)
    except BaseException:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return fd


def check_open_file(fd: int) -> os.stat_result:
    """The opened object must still be a regular, singly-linked file (re-checked after open: a hardlink
    can be made between resolve_path and the open)."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise PathError("access denied: not a regular file (device, FIFO or socket).")
    if info.st_nlink > 1:
        raise PathError(
            f"access denied: hardlinked file (link count {info.st_nlink}); tools refuse hardlinks."
        )
    return info


def write_atomically(resolved: Path, workspace: Path, data: bytes) -> None:
    """Replace a file through a temporary sibling and ``rename``: readers never see half a file, and the
    rename replaces the directory entry itself, so it cannot write through a symlink or a hardlink
    planted after the check."""
    dir_fd, name = open_parent(resolved, workspace=workspace, create=True)
    temporary = f".toolgate-{secrets.token_hex(8)}.tmp"
    try:
        mode = FILE_MODE
        try:
            existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(existing.st_mode):
                raise PathError("access denied: path contains mutable symlink component.")
            if stat.S_ISDIR(existing.st_mode):
                raise IsADirectoryError(name)
            if not stat.S_ISREG(existing.st_mode) or existing.st_nlink > 1:
                raise PathError("access denied: not a regular, singly-linked file.")
            mode = stat.S_IMODE(existing.st_mode)  # keep an executable script executable
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def resolve_cwd(ctx: CallContext, requested: Any) -> Path | str:
    """The working directory (a resolved Path inside the workspace) or an error message."""
    if requested is None or requested == "":
        try:
            return real_workspace(ctx.workspace)
        except PathError as error:
            return str(error)
    if not isinstance(requested, str):
        return "cwd must be a string: a directory relative to the workspace."
    try:
        resolved = resolve_path(requested, workspace=ctx.workspace)
    except PathError as error:
        return f"cwd refused: {error}"
    if not resolved.is_dir():
        return f"cwd refused: {requested!r} is not an existing directory in the workspace."
    return resolved
