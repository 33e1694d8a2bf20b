"""The fs tools: read_file, write_file, edit, list_files, search and glob, on the call's workspace.

Every path goes through :func:`apps.toolkit.workspace.resolve_path` (SPEC B §8 plus sensitive paths and
PathDenyable prefixes), and every open goes component by component with ``O_NOFOLLOW`` (``open_parent``
/ ``open_read`` / ``os.fwalk``), so what was checked is what is used even if the agent re-points a
symlink in between (an agent with ``exec`` can). Outputs name paths relative to the workspace, never the
host path.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from apps.toolkit import vfs
from apps.toolkit.context import CallContext
from apps.toolkit.registry import ToolFunction, tool
from apps.toolkit.results import ToolResult
from apps.toolkit.workspace import (
    BINARY_EXTENSIONS,
    DEFAULT_DENIED_PREFIXES,
    DISK_FULL,
    FILE_MODE,
    PathError,
    check_open_file,
    disk_full,
    is_hidden,
    normalise_prefixes,
    open_parent,
    open_read,
    real_workspace,
    resolve_path,
    write_atomically,
)

# --- limits (seed 003 `file` tool, plus Toolgate's caps) -----------------------------------------------
READ_DEFAULT_LIMIT = 2000  # lines
READ_MAX_LINE_CHARS = 2000  # longer lines are cut, with a marker
READ_LINE_BUFFER = 1024 * 1024  # bytes read per line at most (Nebo's 1 MB buffer); the rest is skipped
READ_MAX_CHARS = 250_000  # total characters one read returns; the model is told how to continue
MAX_FILE_BYTES = 10 * 1024 * 1024  # largest file write_file / edit produce, and edit reads
LIST_MAX_ENTRIES = 1000
WALK_MAX_ENTRIES = 100_000  # entries a list/glob/search walk visits before it stops
SEARCH_DEFAULT_LIMIT = 100
SEARCH_MAX_PATTERN = 1000
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024  # bigger files are skipped (and counted)
SEARCH_MAX_TOTAL_BYTES = 32 * 1024 * 1024
SEARCH_TIMEOUT_SECONDS = 10.0
SEARCH_MAX_LINE_CHARS = 500  # of a matching line in the output
GLOB_DEFAULT_LIMIT = 1000

# Directories glob and search never descend into (seed 003: dot-dirs, node_modules, vendor, __pycache__).
JUNK_DIRS = frozenset({"node_modules", "vendor", "__pycache__"})


class _ArgError(Exception):
    """A bad argument; the message is the error result."""


# --- shared helpers -----------------------------------------------------------------------------------


def _str_arg(args: dict[str, Any], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if value is None:
        raise _ArgError(f"missing required argument {name!r}.")
    if not isinstance(value, str):
        raise _ArgError(f"argument {name!r} must be a string.")
    return value


def _int_arg(args: dict[str, Any], name: str, default: int, *, minimum: int = 1, maximum: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _ArgError(f"argument {name!r} must be an integer from {minimum} to {maximum}.")
    return value


def _bool_arg(args: dict[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _ArgError(f"argument {name!r} must be true or false.")
    return value


def denied_prefixes(ctx: CallContext, tool_name: str) -> tuple[str, ...]:
    """The tool's built-in denied prefixes plus ``settings_for(tool)["denied_prefixes"]``.

    A malformed setting fails closed (the call is refused) rather than silently dropping the list."""
    configured = ctx.settings_for(tool_name).get("denied_prefixes") or ()
    if not isinstance(configured, list | tuple) or not all(isinstance(p, str) for p in configured):
        raise _ArgError(
            f"the {tool_name} tool is misconfigured (denied_prefixes must be a list of strings); "
            "ask an administrator to fix the tool settings."
        )
    return DEFAULT_DENIED_PREFIXES[tool_name] + tuple(configured)


def _shown(resolved: Path, ws_real: Path) -> str:
    relative = os.path.relpath(resolved, ws_real)
    return "." if relative == "." else relative


def _kind(info: os.stat_result) -> str:
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    return "other"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _not_found(shown: str) -> ToolResult:
    return ToolResult.error(
        f"file not found: {shown}. Use list_files or glob to find the right path (paths are relative "
        "to your workspace)."
    )


def _is_binary_name(name: str) -> bool:
    return name.rsplit(".", 1)[-1].lower() in BINARY_EXTENSIONS if "." in name else False


def _guard(function: ToolFunction) -> ToolFunction:
    """Turn the expected failures of a tool body into error results (tools never raise)."""

    def run(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        try:
            result = function(ctx, args)
        except (_ArgError, PathError) as error:
            return ToolResult.error(str(error))
        except PermissionError:
            return ToolResult.error("permission denied by the file system; choose another path.")
        except OSError as error:
            if disk_full(error):
                return ToolResult.error(DISK_FULL)
            return ToolResult.error(f"file system error: {error.strerror or error}.")
        return result

    run.__name__ = function.__name__
    run.__doc__ = function.__doc__
    return run


# --- read_file ----------------------------------------------------------------------------------------


@tool("read_file")
@_guard
def read_file(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Lines ``offset``.. of a text file, numbered like ``cat -n``; long lines cut, output capped."""
    path = _str_arg(args, "path")
    offset = _int_arg(args, "offset", 1, maximum=10**9)
    limit = _int_arg(args, "limit", READ_DEFAULT_LIMIT, maximum=10**6)
    virtual = vfs.interceptor_for(ctx, path)
    if virtual is not None:
        return _read_virtual(ctx, *virtual, offset=offset, limit=limit)
    ws_real = real_workspace(ctx.workspace)
    target = resolve_path(path, workspace=ctx.workspace, denied_prefixes=denied_prefixes(ctx, "read_file"))
    shown = _shown(target, ws_real)
    info = _lstat(target)
    if info is None:
        return _not_found(shown)
    if stat.S_ISDIR(info.st_mode):
        return ToolResult.error(
            f"{shown} is a directory, not a file. Use list_files to see what it contains."
        )
    if _is_binary_name(target.name):
        return ToolResult.error(
            f"{shown} is a binary file ({target.suffix}); read_file only reads text files. "
            "Use a media tool for images, audio and documents."
        )
    try:
        fd = open_read(target, workspace=ctx.workspace)
    except FileNotFoundError:
        return _not_found(shown)
    with os.fdopen(fd, "rb") as handle:
        if b"\x00" in handle.read(8192):
            return ToolResult.error(
                f"{shown} looks like a binary file (it contains NUL bytes); read_file only reads text."
            )
        handle.seek(0)
        return _numbered(handle, shown, offset, limit)


def _read_virtual(
    ctx: CallContext, interceptor: vfs.Interceptor, path: str, *, offset: int, limit: int
) -> ToolResult:
    """read_file of a virtual file: the interceptor's text, numbered like a file on disk."""
    loaded = interceptor.load(ctx, path)
    if isinstance(loaded, ToolResult):
        return loaded
    result = _numbered(
        io.BytesIO(loaded.content.encode("utf-8", errors="surrogatepass")), path, offset, limit
    )
    if loaded.note and not result.is_error:
        return ToolResult.ok(f"{result.for_llm}\n\n{loaded.note}", **result.data, source=interceptor.name)
    return result


def _numbered(handle: Any, shown: str, offset: int, limit: int) -> ToolResult:
    """Lines ``offset``.. of ``handle`` (a binary file object), numbered like ``cat -n``."""
    lines: list[str] = []
    size = 0
    number = 0  # lines seen so far
    reason = ""  # why the output stopped before the end of the file ("" = it did not)
    while (raw := _read_line(handle)) is not None:
        if number + 1 < offset:
            number += 1
            continue
        if len(lines) >= limit:
            reason = f"limit {limit} lines"
            break
        text = raw.decode("utf-8", errors="replace").rstrip("\n").rstrip("\r")
        if len(text) > READ_MAX_LINE_CHARS:
            text = text[:READ_MAX_LINE_CHARS] + f" … [line truncated at {READ_MAX_LINE_CHARS} characters]"
        entry = f"{number + 1:>6}\t{text}"
        if lines and size + len(entry) + 1 > READ_MAX_CHARS:
            reason = f"output capped at {READ_MAX_CHARS} characters"
            break
        number += 1
        lines.append(entry)
        size += len(entry) + 1
    if number == 0:
        return ToolResult.ok(f"({shown} is empty)", path=shown, lines=0)
    if not lines:
        return ToolResult.error(
            f"offset {offset} is past the end of {shown} (it has {number} lines). Use a smaller offset."
        )
    first, last = offset, offset + len(lines) - 1
    text = "\n".join(lines)
    if reason:
        text += (
            f"\n\n[{shown}: showing lines {first}-{last} ({reason}); more lines follow: "
            f"read again with offset={last + 1}]"
        )
    return ToolResult.ok(text, path=shown, first_line=first, last_line=last, truncated=bool(reason))


def _read_line(handle: Any) -> bytes | None:
    """One line of at most READ_LINE_BUFFER bytes; the rest of an over-long line is skipped, so a
    gigabyte without a newline never sits in memory."""
    raw: bytes = handle.readline(READ_LINE_BUFFER)
    if not raw:
        return None
    if len(raw) == READ_LINE_BUFFER and not raw.endswith(b"\n"):
        while True:
            rest: bytes = handle.readline(READ_LINE_BUFFER)
            if not rest or rest.endswith(b"\n"):
                break
    return raw


# --- write_file ---------------------------------------------------------------------------------------


@tool("write_file")
@_guard
def write_file(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Create or replace a file (or append to it); parent folders are created."""
    path = _str_arg(args, "path")
    content = _str_arg(args, "content")
    append = _bool_arg(args, "append")
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_FILE_BYTES:
        return ToolResult.error(
            f"content is {len(data)} bytes; write_file writes at most {MAX_FILE_BYTES} bytes. "
            "Split it into several files or write it in parts with append=true."
        )
    virtual = vfs.interceptor_for(ctx, path)
    if virtual is not None:
        interceptor, logical = virtual
        return interceptor.store(ctx, logical, content, append=append)
    ws_real = real_workspace(ctx.workspace)
    target = resolve_path(path, workspace=ctx.workspace, denied_prefixes=denied_prefixes(ctx, "write_file"))
    shown = _shown(target, ws_real)
    if target == ws_real or ((info := _lstat(target)) is not None and stat.S_ISDIR(info.st_mode)):
        return ToolResult.error(f"{shown} is a directory; give a file path such as {shown}/notes.md.")
    try:
        if append:
            total = _append(target, ctx.workspace, data)
            return ToolResult.ok(
                f"Appended {len(data)} bytes to {shown} (now {total} bytes).", path=shown, bytes=total
            )
        write_atomically(target, ctx.workspace, data)
    except IsADirectoryError:
        return ToolResult.error(f"{shown} is a directory; give a file path such as {shown}/notes.md.")
    except NotADirectoryError:
        return ToolResult.error(f"a parent of {shown} is a file, not a directory; choose another path.")
    return ToolResult.ok(f"Wrote {len(data)} bytes to {shown}.", path=shown, bytes=len(data))


def _append(target: Path, workspace: Path, data: bytes) -> int:
    dir_fd, name = open_parent(target, workspace=workspace, create=True)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(name, flags, FILE_MODE, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:  # the final component became a symlink
            raise PathError("access denied: path contains mutable symlink component.") from None
        raise
    finally:
        os.close(dir_fd)
    try:
        info = check_open_file(fd)
        if info.st_size + len(data) > MAX_FILE_BYTES:
            raise _ArgError(
                f"appending would make the file {info.st_size + len(data)} bytes; files are capped at "
                f"{MAX_FILE_BYTES} bytes. Start a new file."
            )
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


# --- edit ---------------------------------------------------------------------------------------------


@tool("edit")
@_guard
def edit(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Replace an exact ``old_string``; more than one match is refused unless ``replace_all``."""
    path = _str_arg(args, "path")
    old = _str_arg(args, "old_string")
    new = _str_arg(args, "new_string", "")
    replace_all = _bool_arg(args, "replace_all")
    if not old:
        return ToolResult.error(
            "old_string is empty; give the exact text to replace (use write_file to create a file)."
        )
    if old == new:
        return ToolResult.error("old_string and new_string are the same; nothing would change.")
    virtual = vfs.interceptor_for(ctx, path)
    if virtual is not None:
        interceptor, logical = virtual
        loaded = interceptor.load(ctx, logical)
        if isinstance(loaded, ToolResult):  # refused, or a file that does not exist (a quiet answer to reads)
            return (
                loaded
                if loaded.is_error
                else ToolResult.error(
                    f"{logical} does not exist yet, so there is nothing to edit; create it with write_file."
                )
            )
        replaced = _replace(loaded.content, old, new, replace_all, logical)
        if isinstance(replaced, ToolResult):
            return replaced
        stored = interceptor.store(ctx, logical, replaced[0], append=False)
        return stored if stored.is_error else replaced[1]
    ws_real = real_workspace(ctx.workspace)
    target = resolve_path(path, workspace=ctx.workspace, denied_prefixes=denied_prefixes(ctx, "edit"))
    shown = _shown(target, ws_real)
    info = _lstat(target)
    if info is None:
        return _not_found(shown)
    if stat.S_ISDIR(info.st_mode):
        return ToolResult.error(f"{shown} is a directory, not a file.")
    if info.st_size > MAX_FILE_BYTES:
        return ToolResult.error(
            f"{shown} is {info.st_size} bytes; edit works on files up to {MAX_FILE_BYTES} bytes."
        )
    fd = open_read(target, workspace=ctx.workspace)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)
    if b"\x00" in raw:
        return ToolResult.error(f"{shown} looks like a binary file; edit only changes text files.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ToolResult.error(f"{shown} is not UTF-8 text; edit only changes UTF-8 text files.")
    replaced = _replace(text, old, new, replace_all, shown)
    if isinstance(replaced, ToolResult):
        return replaced
    write_atomically(target, ctx.workspace, replaced[0].encode("utf-8", errors="surrogatepass"))
    return replaced[1]


def _replace(
    text: str, old: str, new: str, replace_all: bool, shown: str
) -> tuple[str, ToolResult] | ToolResult:
    """``text`` with the exact ``old`` replaced, and the answer to give once it is saved; or the
    refusal (not found, ambiguous, too large)."""
    count = text.count(old)
    if count == 0:
        return ToolResult.error(f"old_string was not found in {shown}. {_not_found_hint(text, old)}")
    if count > 1 and not replace_all:
        lines = _match_lines(text, old)
        where = ", ".join(map(str, lines[:10])) + (", …" if len(lines) > 10 else "")
        return ToolResult.error(
            f"old_string occurs {count} times in {shown} (lines {where}). Include more surrounding text "
            "so it matches exactly once, or set replace_all=true to replace every occurrence."
        )
    first_line = text[: text.index(old)].count("\n") + 1
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    size = len(updated.encode("utf-8", errors="surrogatepass"))
    if size > MAX_FILE_BYTES:
        return ToolResult.error(
            f"the edited file would be {size} bytes; files are capped at {MAX_FILE_BYTES}."
        )
    replaced = count if replace_all else 1
    noun = "occurrence" if replaced == 1 else "occurrences"
    return updated, ToolResult.ok(
        f"Edited {shown}: replaced {replaced} {noun} (first at line {first_line}).",
        path=shown,
        replacements=replaced,
        line=first_line,
    )


def _match_lines(text: str, needle: str) -> list[int]:
    lines: list[int] = []
    start = 0
    while (index := text.find(needle, start)) != -1:
        lines.append(text.count("\n", 0, index) + 1)
        start = index + len(needle)
    return lines


def _not_found_hint(text: str, old: str) -> str:
    """Say why an exact match failed when the reason is guessable: read_file's line-number prefixes
    copied along, or a difference only in whitespace / indentation."""
    if re.search(r"^\s*\d+\t", old, re.MULTILINE):
        stripped = re.sub(r"^\s*\d+\t", "", old, flags=re.MULTILINE)
        if stripped in text:
            return (
                "It includes read_file's line-number prefixes; remove them (they are not part of the file)."
            )
    words = old.split()
    if words:
        loose = re.search(r"\s+".join(map(re.escape, words)), text)
        if loose is not None:
            line = text.count("\n", 0, loose.start()) + 1
            return (
                f"Text that differs only in whitespace or indentation exists at line {line}; read the file "
                "again with read_file and copy the exact text."
            )
    return "Read the file again with read_file and copy the exact text, including whitespace and indentation."


# --- walking (list_files, glob, search) ---------------------------------------------------------------


@dataclass
class _Entry:
    parts: tuple[str, ...]  # workspace-relative components
    kind: str  # dir | file | symlink | other
    info: os.stat_result
    dir_fd: int  # of the containing directory, valid while the walk is at this entry
    name: str

    @property
    def path(self) -> str:
        return "/".join(self.parts)


def _walk(
    base: Path,
    ws_real: Path,
    *,
    prefixes: Sequence[str],
    recursive: bool,
    descend_hidden: bool,
    budget: list[int],
) -> Iterator[_Entry]:
    """Entries below ``base`` (a resolved directory), sorted by name within each directory.

    ``os.fwalk`` with ``follow_symlinks=False`` walks by directory file descriptors and never enters a
    symlinked directory (it re-checks each directory it opens), so a link planted during the walk
    cannot lead outside. Sensitive and denied entries are omitted entirely (PathDenyable: the agent
    does not learn they exist). ``budget[0]`` counts down the entries visited."""
    base_parts = tuple(Path(os.path.relpath(base, ws_real)).parts) if base != ws_real else ()
    parent_fd: int | None = None
    if base == ws_real:
        top = str(ws_real)
    else:
        parent_fd, top = open_parent(base, workspace=ws_real)
    normalised = normalise_prefixes(prefixes)
    try:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(top, dir_fd=parent_fd, follow_symlinks=False):
            below = os.path.relpath(dirpath, top)
            rel_dir = base_parts + (tuple(below.split(os.sep)) if below != "." else ())
            descend: list[str] = []
            for name in sorted(dirnames + filenames):
                if budget[0] <= 0:
                    dirnames[:] = []
                    return
                budget[0] -= 1
                parts = (*rel_dir, name)
                if is_hidden(parts, normalised):
                    continue
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue  # vanished meanwhile
                kind = _kind(info)
                yield _Entry(parts, kind, info, dir_fd, name)
                hidden_dir = name.startswith(".") or name in JUNK_DIRS
                if kind == "dir" and recursive and (descend_hidden or not hidden_dir):
                    descend.append(name)
            dirnames[:] = descend
    finally:
        if parent_fd is not None:
            os.close(parent_fd)


def _resolve_dir(ctx: CallContext, tool_name: str, args: dict[str, Any]) -> tuple[Path, Path, str]:
    path = _str_arg(args, "path", ".") or "."
    ws_real = real_workspace(ctx.workspace)
    target = resolve_path(path, workspace=ctx.workspace, denied_prefixes=denied_prefixes(ctx, tool_name))
    return target, ws_real, _shown(target, ws_real)


# --- list_files ---------------------------------------------------------------------------------------


@tool("list_files")
@_guard
def list_files(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """A directory's entries (``recursive``: the tree below, junk directories not expanded)."""
    recursive = _bool_arg(args, "recursive")
    try:
        target, ws_real, shown = _resolve_dir(ctx, "list_files", args)
    except PathError:
        virtual = _virtual_folder(ctx, _str_arg(args, "path", ".") or ".", recursive)
        if virtual is None:
            raise
        return virtual
    info = _lstat(target)
    if info is None:
        virtual = _virtual_folder(ctx, _str_arg(args, "path", ".") or ".", recursive)
        if virtual is not None:
            return virtual
        return ToolResult.error(f"directory not found: {shown}. Use list_files on '.' to see the workspace.")
    if not stat.S_ISDIR(info.st_mode):
        return ToolResult.error(f"{shown} is a file, not a directory. Use read_file to read it.")
    base_len = 0 if target == ws_real else len(Path(shown).parts)
    budget = [WALK_MAX_ENTRIES]
    rows: list[str] = []
    more = False
    for entry in _walk(
        target,
        ws_real,
        prefixes=denied_prefixes(ctx, "list_files"),
        recursive=recursive,
        descend_hidden=False,
        budget=budget,
    ):
        if len(rows) >= LIST_MAX_ENTRIES:
            more = True
            break
        rows.append(_list_row("/".join(entry.parts[base_len:]), entry, recursive))
    if target == ws_real:
        folders: list[str] = []
        for stored in vfs.entries(ctx):
            if recursive or "/" not in stored.path:
                rows.append(_virtual_row(stored))
            elif (folder := stored.path.split("/", 1)[0] + "/") not in folders:
                folders.append(folder)  # e.g. memory/: its files are listed by list_files("memory")
        rows.extend(f"{folder}  (stored by Toolgate)" for folder in folders)
    if not rows:
        return ToolResult.ok(f"{shown} is empty.", path=shown, entries=0)
    header = f"{shown}/ ({len(rows)} entries{', recursive' if recursive else ''}):"
    text = header + "\n" + "\n".join(rows)
    if more or budget[0] <= 0:
        text += f"\n[listing stopped at {len(rows)} entries; list a sub-directory to see the rest]"
    return ToolResult.ok(text, path=shown, entries=len(rows), truncated=more or budget[0] <= 0)


def _virtual_folder(ctx: CallContext, path: str, recursive: bool) -> ToolResult | None:
    """The listing of a folder the disk refuses or lacks that holds virtual files (``memory/``: the
    disk's copy is denied to the fs tools), or None."""
    folder = vfs.logical_path(ctx, path)
    if folder is None:
        return None
    inside = [entry for entry in vfs.entries(ctx) if entry.path.startswith(f"{folder}/")]
    if not inside:
        return None
    rows: list[str] = []
    for entry in inside:
        relative = entry.path[len(folder) + 1 :]
        if recursive or "/" not in relative:
            rows.append(_virtual_row(vfs.VirtualEntry(relative, entry.size, entry.source)))
        elif (sub := relative.split("/", 1)[0] + "/") not in rows:
            rows.append(sub)
    header = f"{folder}/ ({len(rows)} entries{', recursive' if recursive else ''}):"
    return ToolResult.ok(header + "\n" + "\n".join(rows), path=folder, entries=len(rows), truncated=False)


def _virtual_row(entry: vfs.VirtualEntry) -> str:
    """A virtual file in a listing: its path, size and where it lives (never on disk)."""
    return f"{entry.path}  ({entry.size} bytes; {entry.source}, stored by Toolgate)"


def _list_row(relative: str, entry: _Entry, recursive: bool) -> str:
    if entry.kind == "dir":
        junk = recursive and (entry.name.startswith(".") or entry.name in JUNK_DIRS)
        return f"{relative}/" + ("  (not expanded)" if junk else "")
    if entry.kind == "file":
        return f"{relative}  ({entry.info.st_size} bytes)"
    if entry.kind == "symlink":
        return f"{relative}@  (symlink; tools do not follow it)"
    return f"{relative}  (special file)"


# --- glob ---------------------------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A doublestar glob as a regex over '/'-separated relative paths: ``**/`` is zero or more
    directories, ``*`` and ``?`` stay inside one name, ``[...]`` / ``[!...]`` classes, ``{a,b}``
    alternatives."""
    return re.compile(_glob_part(pattern) + r"\Z", re.DOTALL)


def _glob_part(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        elif char == "{" and (end := pattern.find("}", i)) != -1:
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob_part(option) for option in options) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _check_glob(pattern: str, argument: str) -> re.Pattern[str]:
    if not pattern:
        raise _ArgError(f"{argument} is empty; give a pattern such as '**/*.py'.")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise _ArgError(
            f"{argument} must be relative (no leading '/' and no '..'); put the directory in path instead."
        )
    try:
        return glob_regex(pattern)
    except re.error:
        raise _ArgError(f"{argument} {pattern!r} is not a valid glob (check its [ ] and {{ }}).") from None


@tool("glob")
@_guard
def glob(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Paths matching a glob below ``path``, newest first; dot-dirs and junk dirs are not searched."""
    pattern = _str_arg(args, "pattern")
    limit = _int_arg(args, "limit", GLOB_DEFAULT_LIMIT, maximum=10000)
    matcher = _check_glob(pattern, "pattern")
    target, ws_real, shown = _resolve_dir(ctx, "glob", args)
    info = _lstat(target)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return ToolResult.error(f"{shown} is not a directory of the workspace; give a directory in path.")
    base_len = 0 if target == ws_real else len(Path(shown).parts)
    budget = [WALK_MAX_ENTRIES]
    found: list[tuple[float, str]] = []
    for entry in _walk(
        target,
        ws_real,
        prefixes=denied_prefixes(ctx, "glob"),
        recursive=True,
        descend_hidden=False,
        budget=budget,
    ):
        if entry.kind not in ("file", "dir"):
            continue
        if entry.kind == "dir" and (entry.name.startswith(".") or entry.name in JUNK_DIRS):
            continue  # skipped, not searched: listing them would invite reading what glob hides
        if matcher.match("/".join(entry.parts[base_len:])):
            found.append((entry.info.st_mtime, entry.path + ("/" if entry.kind == "dir" else "")))
    found.sort(key=lambda item: (-item[0], item[1]))
    stopped = budget[0] <= 0
    if not found:
        hint = (
            ""
            if "/" in pattern
            else f" Patterns match from {shown}; use '**/{pattern}' to search sub-directories."
        )
        return ToolResult.ok(f"No files match {pattern!r} in {shown}.{hint}", matches=0, path=shown)
    paths = [path for _, path in found[:limit]]
    text = "\n".join(paths)
    if len(found) > limit:
        text += f"\n[{len(found) - limit} more matches not shown; narrow the pattern or raise limit]"
    if stopped:
        text += "\n[search stopped early: too many entries; narrow path]"
    return ToolResult.ok(text, matches=len(found), path=shown, truncated=len(found) > limit or stopped)


# --- search -------------------------------------------------------------------------------------------

# Python's `re` cannot be interrupted, and a pattern like (a|aa)+$ backtracks for ages on one line. The
# `regex` module can: every search gets what is left of SEARCH_TIMEOUT_SECONDS and raises TimeoutError
# when it runs out, so the matching runs in-process (no interpreter to start per call) and is still
# bounded. Its default syntax (VERSION0) is `re`'s.


def _search_lines(
    compiled: Any, files: list[tuple[str, str]], limit: int, deadline: float
) -> list[tuple[str, int, str]] | None:
    """Up to ``limit + 1`` matching lines (path, number, text), or None when the deadline passed."""
    found: list[tuple[str, int, str]] = []
    for path, text in files:
        for number, line in enumerate(text.split("\n"), 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                hit = compiled.search(line, timeout=remaining)
            except TimeoutError:
                return None
            if hit is not None:
                found.append((path, number, line))
                if len(found) > limit:
                    return found
    return found


@tool("search")
@_guard
def search(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Lines matching a regular expression in the text files below ``path`` (binaries and junk
    directories skipped), as ``path:line: text``."""
    pattern = _str_arg(args, "pattern")
    file_glob = _str_arg(args, "glob", "")
    ignore_case = _bool_arg(args, "case_insensitive")
    limit = _int_arg(args, "limit", SEARCH_DEFAULT_LIMIT, maximum=1000)
    if not pattern:
        return ToolResult.error("pattern is empty; give a regular expression such as 'def \\w+'.")
    if len(pattern) > SEARCH_MAX_PATTERN:
        return ToolResult.error(f"pattern is longer than {SEARCH_MAX_PATTERN} characters; use a shorter one.")
    try:
        compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as error:
        return ToolResult.error(
            f"invalid regular expression: {error}. "
            "Escape special characters such as ( [ . * with a backslash."
        )
    name_glob = _check_glob(file_glob, "glob") if file_glob else None
    target, ws_real, shown = _resolve_dir(ctx, "search", args)
    info = _lstat(target)
    if info is None:
        return ToolResult.error(f"not found: {shown}. Search '.' (the workspace) or an existing directory.")
    files, skipped, stopped = _collect_texts(ctx, target, ws_real, info, name_glob, file_glob)
    if not files:
        return ToolResult.ok(f"No text files to search in {shown}.", matches=0, path=shown)
    matched = _search_lines(compiled, files, limit, time.monotonic() + SEARCH_TIMEOUT_SECONDS)
    if matched is None:
        return ToolResult.error(
            f"search timed out after {SEARCH_TIMEOUT_SECONDS:g}s: the pattern is too expensive (nested "
            "quantifiers like (a+)+ backtrack a lot). Simplify the pattern or narrow path / glob."
        )
    found = matched
    more = len(found) > limit
    found = found[:limit]
    notes = []
    if skipped:
        notes.append(f"{skipped} files skipped (binary, or larger than {SEARCH_MAX_FILE_BYTES} bytes)")
    if stopped:
        notes.append("search stopped early (too many files or bytes); narrow path or glob")
    tail = "".join(f"\n[{note}]" for note in notes)
    if not found:
        return ToolResult.ok(
            f"No matches for {pattern!r} in {shown} ({len(files)} files searched).{tail}", matches=0
        )
    rows = []
    for path, number, line in found:
        if len(line) > SEARCH_MAX_LINE_CHARS:
            line = line[:SEARCH_MAX_LINE_CHARS] + " …"
        rows.append(f"{path}:{number}: {line.rstrip(chr(13))}")
    text = "\n".join(rows)
    if more:
        text += f"\n[more than {limit} matches; showing the first {limit}. Narrow the pattern, path or glob]"
    return ToolResult.ok(text + tail, matches=len(found), truncated=more or stopped, path=shown)


def _collect_texts(
    ctx: CallContext,
    target: Path,
    ws_real: Path,
    info: os.stat_result,
    name_glob: re.Pattern[str] | None,
    file_glob: str,
) -> tuple[list[tuple[str, str]], int, bool]:
    """(workspace-relative path, text) of every searchable file, the count skipped, and whether a cap
    stopped the collection."""
    files: list[tuple[str, str]] = []
    skipped = 0
    total = 0
    if stat.S_ISREG(info.st_mode):
        fd = open_read(target, workspace=ctx.workspace)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(SEARCH_MAX_FILE_BYTES + 1)
        if len(raw) > SEARCH_MAX_FILE_BYTES or b"\x00" in raw[:8192] or _is_binary_name(target.name):
            return [], 1, False
        return [(_shown(target, ws_real), raw.decode("utf-8", errors="replace"))], 0, False
    if not stat.S_ISDIR(info.st_mode):
        return [], 0, False
    base_len = 0 if target == ws_real else len(Path(_shown(target, ws_real)).parts)
    budget = [WALK_MAX_ENTRIES]
    for entry in _walk(
        target,
        ws_real,
        prefixes=denied_prefixes(ctx, "search"),
        recursive=True,
        descend_hidden=False,
        budget=budget,
    ):
        if entry.kind != "file":
            continue
        if name_glob is not None:
            subject = "/".join(entry.parts[base_len:]) if "/" in file_glob else entry.name
            if not name_glob.match(subject):
                continue
        if (
            entry.info.st_size > SEARCH_MAX_FILE_BYTES
            or entry.info.st_nlink > 1
            or _is_binary_name(entry.name)
        ):
            skipped += 1
            continue
        if total + entry.info.st_size > SEARCH_MAX_TOTAL_BYTES:
            return files, skipped, True
        try:
            fd = os.open(
                entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=entry.dir_fd
            )
        except OSError:
            continue
        try:
            check_open_file(fd)
            with os.fdopen(os.dup(fd), "rb") as handle:
                raw = handle.read(SEARCH_MAX_FILE_BYTES + 1)
        except (OSError, PathError):
            continue
        finally:
            os.close(fd)
        if len(raw) > SEARCH_MAX_FILE_BYTES or b"\x00" in raw[:8192]:
            skipped += 1
            continue
        total += len(raw)
        files.append((entry.path, raw.decode("utf-8", errors="replace")))
    return files, skipped, budget[0] <= 0
