"""A real Docker engine and a small sandbox image built here, without a registry.

The image is the busybox root file system of :mod:`apps.sandbox.image` (Debian's static busybox,
``docker import``); its tag carries a digest of what it is made of, so a changed layout builds a new
one. Every container the tests make carries this run's own installation label and is removed at the end.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from apps.sandbox import image, manager

REPOSITORY = "toolgate-test-sandbox"
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


@pytest.fixture(scope="session")
def sandbox_image() -> Iterator[str]:
    """The tag of the test image on a running engine (built once per content)."""
    client = _engine()
    try:
        tag = image.build_busybox_image(client, repository=REPOSITORY)
    except image.ImageBuildError as error:
        pytest.fail(f"the test sandbox image cannot be built: {error} (make test installs busybox-static)")
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


@pytest.fixture
def agent(tenant_a):  # type: ignore[no-untyped-def]
    """Tenant A's agent ``bot``, the one the tests' calls name."""
    from apps.accounts import services
    from apps.tenants.actors import Actor

    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    """A client of the engine, to look at the containers as Docker sees them."""
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version=manager.API_VERSION)
    yield client
    client.close()


def configure(client, **sandbox) -> None:  # type: ignore[no-untyped-def]
    """Set the tenant's sandbox settings through the tenant API, as an admin would."""
    response = client.patch("/api/v1/tenant/", {"settings": {"sandbox": sandbox}}, format="json")
    assert response.status_code == 200, response.content
