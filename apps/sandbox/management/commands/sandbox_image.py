from __future__ import annotations

from typing import Any

import docker
import docker.errors
import requests
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.sandbox import image, manager

DEFAULT_TAG = "toolgate-sandbox:busybox"
ENGINE_TIMEOUT_SECONDS = 30


class Command(BaseCommand):
    help = (
        "Build the busybox sandbox image (Debian's busybox-static, no registry needed) on the Docker engine "
        "at TOOLGATE_DOCKER_URL and print the settings that let tenants use it. Nothing is done when an "
        "image of the same content already has the tag. The full image is deploy/sandbox/Dockerfile."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tag", default=DEFAULT_TAG, help=f"repository:tag of the image (default {DEFAULT_TAG})"
        )
        parser.add_argument(
            "--default",
            action="store_true",
            help="print the settings that make it the default sandbox image, not just an allowed one",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            repository, tag = image.split_reference(options["tag"])
        except image.ImageBuildError as error:
            raise CommandError(str(error)) from None
        built = self._build(repository, tag)
        state = "built" if built.created else "already there with the same content; nothing done"
        self.stdout.write(f"{built.tag}: {state} ({built.image_id[:19]})")

        allowed = [name for name in settings.TOOLGATE_SANDBOX_IMAGES if name != built.tag]
        self.stdout.write("To let tenants use it, set in the server's environment:")
        if options["default"]:
            self.stdout.write(f"  TOOLGATE_SANDBOX_IMAGE={built.tag}")
            self.stdout.write(f"  TOOLGATE_SANDBOX_IMAGES={','.join([built.tag, *allowed])}")
            return
        default = settings.TOOLGATE_SANDBOX_IMAGE
        allowed = [*([] if default in allowed else [default]), *allowed, built.tag]
        self.stdout.write(f"  TOOLGATE_SANDBOX_IMAGES={','.join(allowed)}")
        self.stdout.write(
            f'A tenant or agent then chooses it with the sandbox setting "image": "{built.tag}"; '
            "--default prints the settings that make it the server's default instead."
        )

    def _build(self, repository: str, tag: str) -> image.BuiltImage:
        url = settings.TOOLGATE_DOCKER_URL
        try:
            client = docker.DockerClient(
                base_url=url, version=manager.API_VERSION, timeout=ENGINE_TIMEOUT_SECONDS
            )
        except docker.errors.DockerException as error:
            raise CommandError(f"TOOLGATE_DOCKER_URL={url} is not a Docker engine address: {error}") from None
        try:
            client.ping()
            return image.ensure_busybox_image(client, repository, tag)
        except image.ImageBuildError as error:
            raise CommandError(str(error)) from None
        except (requests.exceptions.RequestException, ConnectionError, FileNotFoundError) as error:
            raise CommandError(
                f"the Docker engine at {url} does not answer ({type(error).__name__}); start it (on a "
                "development machine: bash scripts/docker-engine.sh) or point TOOLGATE_DOCKER_URL at it"
            ) from None
        except docker.errors.DockerException as error:
            raise CommandError(f"the Docker engine at {url} refused: {error}") from None
        finally:
            client.close()
