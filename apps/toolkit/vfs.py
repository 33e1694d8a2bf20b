"""Virtual files: paths the fs tools route to the database before the disk (seed 000 §3, SPEC B §8).

An :class:`Interceptor` claims some workspace-relative paths (context files such as ``SOUL.md``, memory
files such as ``MEMORY.md`` and ``memory/…``). ``read_file``, ``write_file`` and ``edit`` ask the
registered interceptors, in their order, before resolving the path on disk; the first that
:meth:`~Interceptor.handles` the path serves the call, the disk is never touched. ``list_files`` adds
their :meth:`~Interceptor.entries` to a listing of the workspace root.

The fs tools keep the formatting: ``read_file`` numbers the lines an interceptor :meth:`~Interceptor.load`s
with its own offset and limit, ``edit`` applies the same exact-match replacement to the loaded text and
:meth:`~Interceptor.store`s the result. An interceptor answers refusals and "not found" itself, as a
:class:`~apps.toolkit.results.ToolResult`.

Interceptors register from their app's ``AppConfig.ready`` with :func:`register`.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from apps.toolkit.context import CallContext
    from apps.toolkit.results import ToolResult


@dataclass(frozen=True)
class Loaded:
    """The text of a virtual file, and a note ``read_file`` shows after it (e.g. where it came from)."""

    content: str
    note: str = ""


@dataclass(frozen=True)
class VirtualEntry:
    """A virtual file as ``list_files`` shows it."""

    path: str  # workspace-relative, e.g. "MEMORY.md" or "memory/notes.md"
    size: int
    source: str  # shown after the entry, e.g. "context file" or "memory"


class Interceptor(Protocol):
    name: str

    def handles(self, ctx: CallContext, path: str) -> bool:
        """Whether ``path`` (workspace-relative, normalised by :func:`logical_path`) is this
        interceptor's for this call."""

    def load(self, ctx: CallContext, path: str) -> Loaded | ToolResult:
        """The file's text, or the result to answer instead (refused, not found)."""

    def store(self, ctx: CallContext, path: str, content: str, *, append: bool) -> ToolResult:
        """Write (or append to) the file; the result is the tool's answer."""

    def entries(self, ctx: CallContext) -> list[VirtualEntry]:
        """The virtual files this call can see (for ``list_files``)."""


_INTERCEPTORS: list[tuple[int, str, Interceptor]] = []


def register(interceptor: Interceptor, *, order: int) -> None:
    """Add ``interceptor``; lower ``order`` asks first (context files 10, memory 20). Registering the
    same name again replaces it."""
    global _INTERCEPTORS
    kept = [entry for entry in _INTERCEPTORS if entry[1] != interceptor.name]
    _INTERCEPTORS = sorted([*kept, (order, interceptor.name, interceptor)], key=lambda entry: entry[:2])


def unregister(name: str) -> None:
    global _INTERCEPTORS
    _INTERCEPTORS = [entry for entry in _INTERCEPTORS if entry[1] != name]


def interceptors() -> list[Interceptor]:
    return [entry[2] for entry in _INTERCEPTORS]


def logical_path(ctx: CallContext, path: str) -> str | None:
    """``path`` as a normalised workspace-relative POSIX path (``./SOUL.md`` and
    ``<workspace>/SOUL.md`` are ``SOUL.md``), or None when it is outside the workspace, empty, has a
    NUL byte or climbs with ``..``: such paths are never virtual, the disk rules refuse them."""
    if not path or "\x00" in path or "\\" in path:
        return None
    if path.startswith("/"):
        relative = None
        for root in {str(ctx.workspace), os.path.realpath(ctx.workspace)}:
            if path == root or path.startswith(root.rstrip("/") + "/"):
                relative = path[len(root.rstrip("/")) + 1 :]
                break
        if relative is None:
            return None
        path = relative
    if any(part == ".." for part in path.split("/")):
        return None
    normal = posixpath.normpath(path)
    if normal in (".", "") or normal.startswith("/"):
        return None
    return normal


def interceptor_for(ctx: CallContext, path: str) -> tuple[Interceptor, str] | None:
    """The interceptor serving ``path`` for this call, with the normalised path, or None (the disk)."""
    logical = logical_path(ctx, path)
    if logical is None:
        return None
    for interceptor in interceptors():
        if interceptor.handles(ctx, logical):
            return interceptor, logical
    return None


def entries(ctx: CallContext) -> list[VirtualEntry]:
    """Every interceptor's virtual files for this call, sorted by path (a path shown once)."""
    seen: dict[str, VirtualEntry] = {}
    for interceptor in interceptors():
        for entry in interceptor.entries(ctx):
            seen.setdefault(entry.path, entry)
    return [seen[path] for path in sorted(seen)]
