"""A tenant's (and agent's) sandbox settings: where a process started for it runs, and within what. The
pure part of the sandbox (modes, ``SandboxConfig``, the allowed images, the limits and their
validation): it reads only Django's settings and the jail's limits, so the runtime settings
(:mod:`apps.toolkit.runtime_settings`) and every app may use it; the containers are :mod:`apps.sandbox`.

They live under ``sandbox`` in ``Tenant.settings`` and ``Agent.settings``; an agent's keys replace the
tenant's one by one (an agent that sets ``mode`` keeps the tenant's limits). Every key is optional:

======================  ================  ===========================================================
key                     default           meaning
======================  ================  ===========================================================
``mode``                ``jail``          ``jail`` (bubblewrap, :mod:`apps.toolkit.jail`), ``docker``
                                          (a container, :mod:`apps.sandbox.manager`) or
                                          ``host`` (only where the operator sets
                                          ``TOOLGATE_ALLOW_HOST_EXEC=1``)
``network``             false             true lets the jail or container reach the network
``pids_limit``          256               16 … 4096 processes (jail and container)
``cpu_seconds``         300               1 … 86400 CPU seconds per process (jail)
``address_space_mb``    4096              64 … 1048576 MiB of address space per process (jail)
``file_size_mb``        1024              1 … 1048576 MiB, the largest file a process may write (jail)
``open_files``          1024              16 … 65536 open files per process (jail)
``scope``               ``session``       a container per ``session``, per ``agent``, or ``shared``
``workspace_access``    ``rw``            the workspace at ``/workspace`` in a container: ``rw``,
                                          ``ro`` or ``none``
``image``               server default    one of the images the server allows (``TOOLGATE_SANDBOX_IMAGES``)
``memory_mb``           512               16 … 16384 for a container; no swap beyond it
``cpus``                1.0               0.1 … 16 for a container
``timeout_seconds``     300               1 … 3600, a command's limit inside a container
``read_only_root``      true              the container image's file system read-only
``tmpfs_size_mb``       64                1 … 1024, each of a container's /tmp, /var/tmp and /run
======================  ================  ===========================================================

Modes written before the jail existed are still read: ``off`` is ``jail`` (nothing runs unconfined any
more), ``all`` is ``docker``, and ``non-main`` is ``docker`` for every agent but ``main`` and
``default``, which get the jail.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings

from apps.toolkit.jail import Limits

JAIL, DOCKER, HOST = "jail", "docker", "host"
MODES = (JAIL, DOCKER, HOST)
LEGACY_MODES = ("off", "non-main", "all")
SCOPES = ("session", "agent", "shared")
WORKSPACE_ACCESS = ("rw", "ro", "none")
# Upstream's "non-main": every agent but these keys runs sandboxed.
MAIN_AGENT_KEYS = frozenset({"main", "default"})
TMPFS_MOUNTS = ("/tmp", "/var/tmp", "/run")  # noqa: S108 - paths inside the container

# key -> (type, minimum, maximum)
NUMBERS: dict[str, tuple[type, float, float]] = {
    "memory_mb": (int, 16, 16384),
    "cpus": (float, 0.1, 16),
    "pids_limit": (int, 16, 4096),
    "timeout_seconds": (int, 1, 3600),
    "cpu_seconds": (int, 1, 86400),
    "address_space_mb": (int, 64, 1048576),
    "file_size_mb": (int, 1, 1048576),
    "open_files": (int, 16, 65536),
    "tmpfs_size_mb": (int, 1, 1024),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "mode": (*MODES, *LEGACY_MODES),
    "scope": SCOPES,
    "workspace_access": WORKSPACE_ACCESS,
}
BOOLEANS = ("network", "read_only_root")
KEYS = (*CHOICES, "image", *NUMBERS, *BOOLEANS)


@dataclass(frozen=True)
class SandboxConfig:
    mode: str = JAIL
    scope: str = "session"
    workspace_access: str = "rw"
    image: str = ""
    memory_mb: int = 512
    cpus: float = 1.0
    pids_limit: int = 256
    timeout_seconds: int = 300
    network: bool = False
    read_only_root: bool = True
    tmpfs_size_mb: int = 64
    cpu_seconds: int = 300
    address_space_mb: int = 4096
    file_size_mb: int = 1024
    open_files: int = 1024

    @classmethod
    def of(cls, values: Mapping[str, Any] | None) -> SandboxConfig:
        """The configuration from stored (validated) settings; unknown or malformed values take the
        defaults, so a hand-edited row can only ever make the sandbox stricter than asked, never off
        when it was on."""
        values = values if isinstance(values, Mapping) else {}
        kwargs: dict[str, Any] = {}
        for key, choices in CHOICES.items():
            if values.get(key) in choices:
                kwargs[key] = values[key]
        if "mode" in values and values["mode"] not in CHOICES["mode"]:
            kwargs["mode"] = JAIL  # a mode that cannot be read confines everything
        for key, (kind, low, high) in NUMBERS.items():
            value = values.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high:
                kwargs[key] = kind(value)
        for key in BOOLEANS:
            if isinstance(values.get(key), bool):
                kwargs[key] = values[key]
        image = values.get("image")
        kwargs["image"] = image if image in allowed_images() else default_image()
        return cls(**kwargs)

    def kind_for(self, agent_key: str) -> str:
        """Where an agent's processes run under this configuration: :data:`JAIL`, :data:`DOCKER` or
        :data:`HOST`. ``host`` only while the installation allows it (``TOOLGATE_ALLOW_HOST_EXEC``);
        otherwise, and for anything else, the jail."""
        if self.mode in (DOCKER, "all"):
            return DOCKER
        if self.mode == "non-main" and agent_key not in MAIN_AGENT_KEYS:
            return DOCKER
        if self.mode == HOST and host_allowed():
            return HOST
        return JAIL

    def applies_to(self, agent_key: str) -> bool:
        """Whether an agent's commands run in a Docker container under this configuration."""
        return self.kind_for(agent_key) == DOCKER

    def jail_limits(self) -> Limits:
        return Limits(
            cpu_seconds=self.cpu_seconds,
            address_space_mb=self.address_space_mb,
            pids=self.pids_limit,
            file_size_mb=self.file_size_mb,
            open_files=self.open_files,
        )

    def fingerprint(self) -> str:
        """What the container is made from: a change of any of it needs a new container."""
        made_of = {k: v for k, v in asdict(self).items() if k in CONTAINER_KEYS}
        return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a container is made from (a change of any of these needs a new container).
CONTAINER_KEYS = (
    "scope", "workspace_access", "image", "memory_mb", "cpus", "pids_limit", "network", "read_only_root",
    "tmpfs_size_mb",
)  # fmt: skip


def host_allowed() -> bool:
    """Whether this installation lets a tenant's processes run on the host (``TOOLGATE_ALLOW_HOST_EXEC``)."""
    return bool(settings.TOOLGATE_ALLOW_HOST_EXEC)


def default_image() -> str:
    return str(settings.TOOLGATE_SANDBOX_IMAGE)


def allowed_images() -> list[str]:
    images = list(settings.TOOLGATE_SANDBOX_IMAGES)
    return images if default_image() in images else [default_image(), *images]


def merged(tenant_value: Any, agent_value: Any) -> dict[str, Any]:
    """The agent's sandbox keys over the tenant's, one by one."""
    result = dict(tenant_value) if isinstance(tenant_value, Mapping) else {}
    if isinstance(agent_value, Mapping):
        result.update(agent_value)
    return result


def validate(value: Any) -> list[str]:
    """What is wrong with a ``sandbox`` settings object (empty when it is valid)."""
    if not isinstance(value, Mapping):
        return ['Must be an object, e.g. {"mode": "all", "scope": "session"}.']
    errors: list[str] = []
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        errors.append(f"Unknown keys: {', '.join(map(str, unknown))}. Known: {', '.join(KEYS)}.")
    for key, choices in CHOICES.items():
        if key in value and value[key] not in choices:
            listed = MODES if key == "mode" else choices
            errors.append(f'"{key}" must be one of {", ".join(listed)}.')
    if value.get("mode") == HOST and not host_allowed():
        errors.append(
            '"mode" cannot be "host" on this installation: processes run in the jail or a container unless '
            "the operator sets TOOLGATE_ALLOW_HOST_EXEC=1 (for a single-tenant install)."
        )
    for key, (kind, low, high) in NUMBERS.items():
        if key not in value:
            continue
        number = value[key]
        numeric = isinstance(number, int | float) and not isinstance(number, bool)
        if not numeric or (kind is int and not isinstance(number, int)) or not low <= number <= high:
            shown = f"{low:g} to {high:g}"
            errors.append(f'"{key}" must be {"a whole number" if kind is int else "a number"} from {shown}.')
    for key in BOOLEANS:
        if key in value and not isinstance(value[key], bool):
            errors.append(f'"{key}" must be true or false.')
    if "image" in value and value["image"] not in allowed_images():
        errors.append(f'"image" must be one of the images this server allows: {", ".join(allowed_images())}.')
    return errors
