"""Files the provider-backed tools read and write, always through the workspace guards.

Inputs are a workspace file (resolved by :func:`apps.toolkit.workspace.resolve_path`, opened with
``O_NOFOLLOW`` component by component, size checked before reading) or an http(s) URL fetched through
the SSRF guard with a size cap. Outputs are written atomically under the path the agent gives, or
``media/<generated name>``, with write_file's denied prefixes (``.git/``, ``memory/`` …) and the tool's
own ``denied_prefixes`` setting.
"""

from __future__ import annotations

import mimetypes
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from apps.toolkit.context import CallContext
from apps.toolkit.ssrf import FetchLimits, SSRFBlocked, fetch
from apps.toolkit.workspace import (
    DEFAULT_DENIED_PREFIXES,
    PathError,
    open_read,
    real_workspace,
    resolve_path,
    write_atomically,
)

MEDIA_DIR = "media"
URL_TIMEOUT = 60.0


class MediaError(Exception):
    """A file the tool cannot use or write; the message says what to do instead."""


@dataclass(frozen=True)
class InputFile:
    data: bytes
    name: str  # the file name (for multipart uploads and messages)
    media_type: str
    shown: str  # the path relative to the workspace, or the URL


@dataclass(frozen=True)
class SavedFile:
    path: str  # relative to the workspace
    bytes: int
    media_type: str

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "bytes": self.bytes, "media_type": self.media_type}


def _denied(ctx: CallContext, tool: str, base: tuple[str, ...]) -> tuple[str, ...]:
    configured = ctx.settings_for(tool).get("denied_prefixes") or ()
    if not isinstance(configured, list | tuple) or not all(isinstance(p, str) for p in configured):
        raise MediaError(
            f"the {tool} tool is misconfigured (denied_prefixes must be a list of strings); ask an "
            "administrator to fix the tool settings."
        )
    return base + tuple(configured)


def sniff(data: bytes, name: str = "") -> str:
    """The media type of ``data`` from its first bytes, else from the file name's extension."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm"
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def read_input(
    ctx: CallContext, *, tool: str, path: str | None, url: str | None, max_bytes: int
) -> InputFile:
    """The file a media_read tool was given: exactly one of a workspace ``path`` or an http(s) ``url``."""
    if bool(path) == bool(url):
        raise MediaError(
            f"{tool} needs exactly one of path (a file in your workspace) or url (http or https)."
        )
    if url:
        return _fetch(tool, url, max_bytes)
    assert path is not None
    ws_real = real_workspace(ctx.workspace)
    target = resolve_path(
        path,
        workspace=ctx.workspace,
        denied_prefixes=_denied(ctx, tool, DEFAULT_DENIED_PREFIXES["read_file"]),
    )
    shown = os.path.relpath(target, ws_real)
    try:
        info = os.lstat(target)
    except OSError:
        raise MediaError(
            f"file not found: {shown}. Use list_files or glob to find the right path (paths are relative "
            "to your workspace)."
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise MediaError(f"{shown} is a directory, not a file.")
    if info.st_size > max_bytes:
        raise MediaError(f"{shown} is {info.st_size} bytes; {tool} reads files of at most {max_bytes} bytes.")
    fd = open_read(target, workspace=ctx.workspace)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise MediaError(
            f"{shown} is larger than {max_bytes} bytes; {tool} reads files of at most that size."
        )
    if not data:
        raise MediaError(f"{shown} is empty.")
    return InputFile(data=data, name=target.name, media_type=sniff(data, target.name), shown=shown)


def _fetch(tool: str, url: str, max_bytes: int) -> InputFile:
    try:
        result = fetch(url, limits=FetchLimits(total_timeout=URL_TIMEOUT, max_bytes=max_bytes))
    except SSRFBlocked as exc:
        raise MediaError(f"{tool} refused {url}: {exc}.") from None
    except httpx.TimeoutException:
        raise MediaError(f"{tool} could not fetch {url}: it timed out.") from None
    except httpx.HTTPError as exc:
        raise MediaError(f"{tool} could not fetch {url}: {exc}.") from None
    if result.status_code != 200:
        raise MediaError(f"{tool} could not fetch {url}: HTTP {result.status_code}.")
    if result.truncated:
        raise MediaError(f"{url} is larger than {max_bytes} bytes; {tool} reads files of at most that size.")
    if not result.body:
        raise MediaError(f"{url} is empty.")
    name = httpx.URL(result.url).path.rsplit("/", 1)[-1] or "download"
    declared = result.content_type
    sniffed = sniff(result.body, name)
    media_type = sniffed if sniffed != "application/octet-stream" or not declared else declared
    return InputFile(data=result.body, name=name[:200], media_type=media_type, shown=url)


def _generated_name(tool: str, extension: str, index: int | None) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    suffix = f"-{index}" if index is not None else ""
    return f"{tool}-{stamp}-{secrets.token_hex(3)}{suffix}.{extension}"


def save_output(
    ctx: CallContext,
    *,
    tool: str,
    path: str | None,
    data: bytes,
    extension: str,
    media_type: str,
    index: int | None = None,
) -> SavedFile:
    """Write ``data`` into the workspace: at ``path`` (a folder, ending in ``/`` or existing, gets a
    generated name inside; ``index`` numbers the files of one call), else ``media/<generated name>``."""
    ws_real = real_workspace(ctx.workspace)
    if not path:
        given = f"{MEDIA_DIR}/{_generated_name(tool, extension, index)}"
    elif path.endswith("/"):
        given = f"{path}{_generated_name(tool, extension, index)}"
    else:
        given = path
        if index is not None:
            stem, dot, ext = path.rpartition(".")
            given = f"{stem}-{index}.{ext}" if dot and "/" not in ext else f"{path}-{index}"
    target = resolve_path(
        given,
        workspace=ctx.workspace,
        denied_prefixes=_denied(ctx, tool, DEFAULT_DENIED_PREFIXES["write_file"]),
    )
    if target == ws_real or (target.exists() and target.is_dir()):
        folder = Path(os.path.relpath(target, ws_real)).as_posix() if target != ws_real else ""
        inner = f"{folder}/" if folder and folder != "." else ""
        target = resolve_path(
            inner + _generated_name(tool, extension, index),
            workspace=ctx.workspace,
            denied_prefixes=_denied(ctx, tool, DEFAULT_DENIED_PREFIXES["write_file"]),
        )
    shown = os.path.relpath(target, ws_real)
    try:
        write_atomically(target, ctx.workspace, data)
    except IsADirectoryError:
        raise MediaError(f"{shown} is a directory; give a file path.") from None
    except NotADirectoryError:
        raise MediaError(f"a parent of {shown} is a file, not a directory; choose another path.") from None
    return SavedFile(path=shown, bytes=len(data), media_type=media_type)


__all__ = ["InputFile", "MediaError", "PathError", "SavedFile", "read_input", "save_output", "sniff"]
