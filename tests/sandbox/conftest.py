"""A real Docker engine and a small sandbox image built here, without a registry.

The image is a root file system made of Debian's static busybox (``busybox-static``) imported with
``docker import`` (the SDK's ``import_image_from_data``); its tag carries a digest of what it is made
of, so a changed layout builds a new one. Every container the tests make carries this run's own
installation label and is removed at the end.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from apps.runtime.sandbox import manager

BUSYBOX = Path("/bin/busybox")
REPOSITORY = "toolgate-test-sandbox"
# Directories of the image; /workspace is where the workspace is mounted, the rest are the tmpfs
# mount points and what a shell expects to find.
DIRECTORIES = ("bin", "tmp", "var/tmp", "run", "workspace", "etc", "proc", "sys", "dev", "root")
RUN_INSTANCE = f"test{uuid.uuid4().hex[:8]}"
ENGINE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine.sh"


def _engine() -> docker.DockerClient:
    """The engine at TOOLGATE_DOCKER_URL; started with scripts/docker-engine.sh when it does not
    answer. A missing engine fails the tests loudly: they are never skipped."""
    from django.conf import settings

    url = settings.TOOLGATE_DOCKER_URL
    for attempt in range(2):
        client = docker.DockerClient(base_url=url, version=manager.API_VERSION, timeout=60)
        try:
            client.ping()
            return client
        except Exception as error:
            client.close()
            if attempt == 1:
                pytest.fail(f"the Docker engine at {url} does not answer ({error}); run {ENGINE_SCRIPT}")
        subprocess.run(["bash", str(ENGINE_SCRIPT)], check=True, timeout=180)
    raise AssertionError("unreachable")


def _applets() -> list[str]:
    listed = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True)
    return sorted(name for name in listed.stdout.split() if name and "/" not in name)


def _rootfs(applets: list[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in DIRECTORIES:
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory in ("tmp", "var/tmp") else 0o755
            tar.addfile(info)
        data = BUSYBOX.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in applets:
            if applet == "busybox":
                continue
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        tar.addfile(info, io.BytesIO(passwd))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def sandbox_image() -> Iterator[str]:
    """The tag of the test image on a running engine (built once per content)."""
    if not BUSYBOX.exists():
        pytest.fail("Debian's busybox-static is missing: apt-get install busybox-static (make test does)")
    client = _engine()
    applets = _applets()
    digest = hashlib.sha256(BUSYBOX.read_bytes() + "\n".join((*applets, *DIRECTORIES)).encode()).hexdigest()
    tag = f"{REPOSITORY}:{digest[:12]}"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        client.api.import_image_from_data(_rootfs(applets), repository=REPOSITORY, tag=digest[:12])
    yield tag
    # Whatever a test left behind of this run goes with it.
    for container in containers_of(client):
        container.remove(force=True)
    client.close()


@pytest.fixture
def sandbox_settings(settings, sandbox_image: str) -> Iterator[str]:
    """Settings that point the sandbox at the test image and this run's installation label."""
    settings.TOOLGATE_SANDBOX_IMAGE = sandbox_image
    settings.TOOLGATE_SANDBOX_IMAGES = [sandbox_image]
    settings.TOOLGATE_SANDBOX_INSTANCE = RUN_INSTANCE
    manager.reset_client()
    yield sandbox_image
    manager.reset_client()
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version=manager.API_VERSION)
    for container in containers_of(client):
        container.remove(force=True)
    client.close()


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def containers_of(client: docker.DockerClient, **labels: str) -> list:  # type: ignore[type-arg]
    filters = [f"{manager.LABEL_INSTANCE}={RUN_INSTANCE}", *(f"toolgate.{k}={v}" for k, v in labels.items())]
    return client.containers.list(all=True, filters={"label": filters})
