"""The busybox sandbox image: ``manage.py sandbox_image`` and ``build_busybox_image``, on the real engine.

Every image a test tags is named after this run and removed at the end; every container carries this
run's installation label (removed by the session fixture)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import docker
import docker.errors
import pytest
from django.core.management import CommandError, call_command

from apps.accounts import services
from apps.sandbox import image, manager
from apps.tenants.actors import Actor
from tests.sandbox.conftest import REPOSITORY, RUN_INSTANCE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engine(sandbox_image: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock", version=manager.API_VERSION)
    yield client
    client.close()


@pytest.fixture
def tag(engine: docker.DockerClient) -> Iterator[str]:
    """A tag of this run that no image has yet; whatever ends up there is removed after the test."""
    name = f"{REPOSITORY}:cmd-{RUN_INSTANCE}"
    yield name
    with contextlib.suppress(docker.errors.ImageNotFound):
        engine.images.remove(name, force=True)


def manage_sandbox_image(*args: str) -> str:
    out = StringIO()
    call_command("sandbox_image", *args, stdout=out)
    return out.getvalue()


def run_in(engine: docker.DockerClient, tag: str, command: str) -> tuple[int, str]:
    """Run ``command`` with ``sh -c`` in a container of ``tag`` made as the manager makes them (Toolgate's
    uid:gid, read-only root, every capability dropped)."""
    container = engine.containers.create(
        tag,
        ["sh", "-c", command],
        labels={manager.LABEL_INSTANCE: RUN_INSTANCE},
        user=f"{os.getuid()}:{os.getgid()}",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        network_mode="none",
    )
    try:
        container.start()
        status = container.wait(timeout=30)["StatusCode"]
        return status, container.logs().decode()
    finally:
        container.remove(force=True)


def tags(engine: docker.DockerClient) -> set[str]:
    """Every tag on the engine but the per-run ones of concurrent test runs."""
    return {name for found in engine.images.list() for name in found.tags if ":cmd-" not in name}


def foreign_image(engine: docker.DockerClient, tag: str, changes: list[str] | None = None) -> str:
    """An image at ``tag`` that holds one file, imported with the given Dockerfile changes; its id."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        data = b"not a sandbox\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    repository, name = tag.rsplit(":", 1)
    engine.api.import_image_from_data(buffer.getvalue(), repository=repository, tag=name, changes=changes)
    return str(engine.images.get(tag).id)


def test_the_command_builds_an_image_whose_containers_run_setsid(engine, tag):
    output = manage_sandbox_image("--tag", tag)

    built = engine.images.get(tag)
    assert f"{tag}: built" in output
    assert f"  TOOLGATE_SANDBOX_IMAGES=toolgate-sandbox:bookworm-slim,{tag}\n" in output
    assert "TOOLGATE_SANDBOX_IMAGE=" not in output
    assert built.attrs["Config"]["Cmd"] == ["sleep", "infinity"]
    assert built.attrs["Config"]["WorkingDir"] == "/workspace"
    status, logs = run_in(engine, tag, "setsid true && echo setsid-ok; id -u; ls -d /workspace /tmp /run")
    assert status == 0, logs
    assert logs.splitlines() == ["setsid-ok", str(os.getuid()), "/run", "/tmp", "/workspace"]


def test_a_second_run_is_a_no_op(engine, tag):
    manage_sandbox_image("--tag", tag)
    first = engine.images.get(tag)

    output = manage_sandbox_image("--tag", tag)

    assert f"{tag}: already there with the same content; nothing done" in output
    again = engine.images.get(tag)
    assert again.id == first.id
    assert again.attrs["Created"] == first.attrs["Created"]


def test_default_prints_the_settings_that_make_it_the_default(engine, tag, settings):
    settings.TOOLGATE_SANDBOX_IMAGE = "toolgate-sandbox:bookworm-slim"
    settings.TOOLGATE_SANDBOX_IMAGES = ["toolgate-sandbox:bookworm-slim", "team/tools:2"]

    output = manage_sandbox_image("--tag", tag, "--default")

    assert f"  TOOLGATE_SANDBOX_IMAGE={tag}\n" in output
    assert f"  TOOLGATE_SANDBOX_IMAGES={tag},toolgate-sandbox:bookworm-slim,team/tools:2\n" in output


@pytest.mark.django_db
def test_exec_runs_in_the_image_with_the_settings_it_prints(
    engine, tag, settings, owner_a, member_a, tenant_a
):
    output = manage_sandbox_image("--tag", tag, "--default")
    assert f"TOOLGATE_SANDBOX_IMAGE={tag}" in output
    settings.TOOLGATE_SANDBOX_IMAGE = tag
    settings.TOOLGATE_SANDBOX_IMAGES = [tag]
    settings.TOOLGATE_SANDBOX_INSTANCE = RUN_INSTANCE
    manager.reset_client()
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    configured = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "all"}}}, format="json")
    assert configured.status_code == 200, configured.content

    try:
        response = member_a.post(
            "/api/v1/runtime/execute",
            {"agent": "bot", "tool": "exec", "args": {"command": "setsid true && echo in-$(hostname); pwd"}},
            format="json",
        )
    finally:
        manager.reset_client()

    body = response.json()
    assert body["is_error"] is False, body
    assert body["for_llm"].splitlines()[:2] == ["in-sandbox", "/workspace"]
    [container] = engine.containers.list(filters={"label": [f"{manager.LABEL_INSTANCE}={RUN_INSTANCE}"]})
    assert container.image.id == engine.images.get(tag).id
    container.remove(force=True)


def test_an_engine_that_does_not_answer_is_a_clear_error(settings, tmp_path):
    settings.TOOLGATE_DOCKER_URL = f"unix://{tmp_path}/no-engine.sock"

    with pytest.raises(CommandError, match=r"the Docker engine at unix://.*no-engine\.sock does not answer"):
        manage_sandbox_image("--tag", f"{REPOSITORY}:never")


def test_an_engine_that_does_not_answer_exits_non_zero(tmp_path):
    env = {
        **os.environ,
        "TOOLGATE_DOCKER_URL": "tcp://127.0.0.1:1",
        "TOOLGATE_EMBEDDED_DB_AUTOSTART": "0",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "sandbox_image"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )

    assert done.returncode == 1
    assert "the Docker engine at tcp://127.0.0.1:1 does not answer" in done.stderr
    assert "scripts/docker-engine.sh" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("Toolgate:UPPER", "is not an image tag"),
        ("toolgate-sandbox:a;rm -rf /", "is not an image tag"),
        ("toolgate-sandbox:" + "x" * 300, "1 to 255 characters"),
        ("", "1 to 255 characters"),
        ("a:b:c", "is not an image tag"),
    ],
)
def test_a_malformed_tag_is_refused(engine, given, message):
    before = tags(engine)

    with pytest.raises(CommandError, match=message):
        manage_sandbox_image("--tag", given)

    assert tags(engine) == before


def test_an_image_it_did_not_build_is_never_overwritten(engine, tag):
    foreign = foreign_image(engine, tag)

    with pytest.raises(CommandError, match="an image this command did not build"):
        manage_sandbox_image("--tag", tag)

    assert engine.images.get(tag).id == foreign


def test_an_image_of_an_older_busybox_is_replaced(engine, tag):
    old = foreign_image(engine, tag, changes=[f"LABEL {image.CONTENT_LABEL}=0123456789abcdef"])

    output = manage_sandbox_image("--tag", tag)

    assert f"{tag}: built" in output
    now = engine.images.get(tag)
    assert now.id != old
    assert now.attrs["Config"]["Labels"][image.CONTENT_LABEL] != "0123456789abcdef"
    assert run_in(engine, tag, "setsid true && echo ok") == (0, "ok\n")


def test_the_default_tag_is_the_content_digest_and_is_found_again(engine, sandbox_image):
    first = image.build_busybox_image(engine, repository=REPOSITORY)
    again = image.ensure_busybox_image(engine, repository=REPOSITORY)

    assert first == sandbox_image  # the tests' own image: same content, same tag
    repository, digest = first.rsplit(":", 1)
    assert repository == REPOSITORY
    assert len(digest) == 12
    assert int(digest, 16) >= 0
    assert (again.tag, again.created) == (first, False)


def test_a_dynamic_busybox_is_refused_with_the_package_to_install(engine):
    dynamic = Path(os.path.realpath("/bin/sh"))
    before = tags(engine)

    with pytest.raises(image.ImageBuildError, match=r"dynamically linked.*apt-get install busybox-static"):
        image.build_busybox_image(engine, repository=REPOSITORY, busybox=dynamic)

    assert tags(engine) == before


def test_something_that_is_not_a_binary_or_missing_is_refused(engine, tmp_path):
    script = tmp_path / "busybox"
    script.write_text("#!/bin/sh\necho busybox\n")

    with pytest.raises(image.ImageBuildError, match="not an ELF executable"):
        image.build_busybox_image(engine, busybox=script)
    with pytest.raises(image.ImageBuildError, match=r"is missing; install Debian's static busybox"):
        image.build_busybox_image(engine, busybox=tmp_path / "absent")
