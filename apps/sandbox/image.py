"""A small sandbox image built on the engine itself, without a registry or a Dockerfile build.

The image is a root file system made of Debian's static busybox (package ``busybox-static``): the one
binary, a link per applet, the directories the sandbox mounts over (``/workspace``, ``/tmp``,
``/var/tmp``, ``/run``) and a minimal ``/etc/passwd`` and ``/etc/group``; it is sent as a tar stream to
``docker import`` (the SDK's ``import_image_from_data``). It has everything the manager's exec wrapper
needs (``sh``, ``setsid``, ``kill``, ``sleep``) and busybox's usual tools, nothing else: enough for
tests, benchmarks and a machine without a registry. The production image is ``deploy/sandbox/Dockerfile``.

The binary must be static: the image has no C library or loader for a dynamic one to start with.

Every image carries the digest of what it is made of in the label :data:`CONTENT_LABEL`. Without an
explicit tag the digest is the tag, so a changed busybox (or layout) builds a new image and an
unchanged one is found at once. With an explicit tag, an image there with the same digest is kept, one
with another digest (an older busybox) is replaced, and an image this module did not build is never
overwritten.
"""

from __future__ import annotations

import hashlib
import io
import re
import struct
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

BUSYBOX = Path("/bin/busybox")
REPOSITORY = "toolgate-sandbox"
CONTENT_LABEL = "toolgate.sandbox.content"
# Bumped whenever the layout below changes in a way the inputs of the digest would not show.
LAYOUT_VERSION = "1"
# /workspace is where the workspace is mounted; /tmp, /var/tmp and /run are the tmpfs mount points; the
# rest is what a shell expects to find.
DIRECTORIES = ("bin", "tmp", "var/tmp", "run", "workspace", "etc", "proc", "sys", "dev", "root")
PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
MAX_REFERENCE_LENGTH = 255
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
# ``name[:tag]``: lowercase path components (an optional registry host with a port in front), a tag
# of up to 128 word characters, dots and dashes.
_REFERENCE = re.compile(
    rf"^(?:[a-z0-9.-]+(?::[0-9]{{1,5}})?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?$"
)
_ELF_MAGIC = b"\x7fELF"
_PT_INTERP = 3  # a program header naming the dynamic loader: present in every dynamic executable


class ImageBuildError(Exception):
    """The image cannot be built here; the message says why and what to do."""


@dataclass(frozen=True)
class BuiltImage:
    tag: str  # repository:tag
    image_id: str
    created: bool  # False: an image of the same content was already there


def split_reference(reference: str) -> tuple[str, str]:
    """``(repository, tag)`` of an image reference (``latest`` when it has no tag); raises
    :class:`ImageBuildError` for anything that is not a well-formed reference."""
    if not isinstance(reference, str) or not 0 < len(reference) <= MAX_REFERENCE_LENGTH:
        raise ImageBuildError(
            f"an image tag is 1 to {MAX_REFERENCE_LENGTH} characters, e.g. toolgate-sandbox:busybox"
        )
    if not _REFERENCE.match(reference):
        raise ImageBuildError(
            f"{reference!r} is not an image tag: lowercase name components (a-z, 0-9, . _ -) separated by "
            "'/', then ':' and a tag of letters, digits, '.', '_' or '-', e.g. toolgate-sandbox:busybox"
        )
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:  # no tag at all (a colon, if any, belonged to a registry port)
        return reference, "latest"
    return name, tag


def check_static(path: Path) -> None:
    """Raise :class:`ImageBuildError` unless ``path`` is a statically linked ELF executable."""
    try:
        with path.open("rb") as handle:
            header = handle.read(64)
            if len(header) < 52 or header[:4] != _ELF_MAGIC:
                raise ImageBuildError(
                    f"{path} is not an ELF executable; install Debian's static busybox: "
                    "apt-get install busybox-static"
                )
            order = "<" if header[5] == 1 else ">"
            if header[4] == 2:  # 64-bit
                (phoff,) = struct.unpack_from(f"{order}Q", header, 32)
                phentsize, phnum = struct.unpack_from(f"{order}HH", header, 54)
            else:
                (phoff,) = struct.unpack_from(f"{order}I", header, 28)
                phentsize, phnum = struct.unpack_from(f"{order}HH", header, 42)
            for index in range(phnum):
                handle.seek(phoff + index * phentsize)
                entry = handle.read(4)
                if len(entry) == 4 and struct.unpack(f"{order}I", entry)[0] == _PT_INTERP:
                    raise ImageBuildError(
                        f"{path} is dynamically linked (as Debian's 'busybox' package is), and the image has "
                        "no C library to run it with; install the static one: apt-get install busybox-static"
                    )
    except FileNotFoundError:
        raise ImageBuildError(
            f"{path} is missing; install Debian's static busybox: apt-get install busybox-static"
        ) from None
    except OSError as error:
        raise ImageBuildError(f"{path} cannot be read: {error.strerror or error}") from None


def _applets(busybox: Path) -> list[str]:
    try:
        listed = subprocess.run(
            [str(busybox), "--list"], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ImageBuildError(f"{busybox} --list failed ({error}); is it busybox?") from None
    applets = sorted(name for name in listed.stdout.split() if name and "/" not in name)
    missing = {"sh", "setsid", "kill", "sleep"} - set(applets)
    if missing:
        raise ImageBuildError(f"{busybox} lacks the applets the sandbox needs: {', '.join(sorted(missing))}")
    return applets


def _changes(digest: str) -> list[str]:
    return [f"LABEL {CONTENT_LABEL}={digest}", "WORKDIR /workspace", 'CMD ["sleep", "infinity"]']


def _digest(binary: bytes, applets: list[str]) -> str:
    made_of = hashlib.sha256(LAYOUT_VERSION.encode() + b"\0" + binary)
    for part in (*applets, *DIRECTORIES, PASSWD.decode(), GROUP.decode(), *_changes("")):
        made_of.update(b"\0" + part.encode())
    return made_of.hexdigest()


def _file(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _rootfs(binary: bytes, applets: list[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in DIRECTORIES:
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory in ("tmp", "var/tmp") else 0o755
            tar.addfile(info)
        _file(tar, "bin/busybox", binary, 0o755)
        for applet in applets:
            if applet == "busybox":
                continue
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        _file(tar, "etc/passwd", PASSWD, 0o644)
        _file(tar, "etc/group", GROUP, 0o644)
    return buffer.getvalue()


def _existing(client: docker.DockerClient, reference: str) -> Any:
    try:
        return client.images.get(reference)
    except docker.errors.ImageNotFound:
        return None


def ensure_busybox_image(
    client: docker.DockerClient,
    repository: str = REPOSITORY,
    tag: str | None = None,
    *,
    busybox: Path = BUSYBOX,
) -> BuiltImage:
    """The busybox image at ``repository:tag`` on the engine of ``client``, built unless an image of the
    same content is there (see the module docstring). Raises :class:`ImageBuildError` for a busybox that
    cannot be used or a tag held by another image; engine errors (``docker.errors.DockerException``,
    ``requests`` errors) pass through."""
    # Validated with a placeholder tag: a repository that already carries one is refused too.
    repository, _ = split_reference(f"{repository}:{tag or 'latest'}")
    check_static(busybox)
    binary = busybox.read_bytes()
    applets = _applets(busybox)
    digest = _digest(binary, applets)
    tag = digest[:12] if tag is None else tag
    reference = f"{repository}:{tag}"
    found = _existing(client, reference)
    if found is not None:
        labels = (found.attrs.get("Config") or {}).get("Labels") or {}
        if labels.get(CONTENT_LABEL) == digest:
            return BuiltImage(tag=reference, image_id=str(found.id), created=False)
        if CONTENT_LABEL not in labels:
            raise ImageBuildError(
                f"{reference} is an image this command did not build (no {CONTENT_LABEL} label); it is left "
                "alone: choose another tag, or remove it first (docker rmi)"
            )
    client.api.import_image_from_data(
        _rootfs(binary, applets), repository=repository, tag=tag, changes=_changes(digest)
    )
    built = client.images.get(reference)
    return BuiltImage(tag=reference, image_id=str(built.id), created=True)


def build_busybox_image(
    client: docker.DockerClient,
    repository: str = REPOSITORY,
    tag: str | None = None,
    *,
    busybox: Path = BUSYBOX,
) -> str:
    """The tag (``repository:tag``) of the busybox sandbox image on the engine, built when missing; the
    tag is the content digest unless one is given. See :func:`ensure_busybox_image`."""
    return ensure_busybox_image(client, repository, tag, busybox=busybox).tag
