"""A tenant's (and agent's) sandbox settings: defaults of SPEC B §6.3, validation, and when they apply.

They live under ``sandbox`` in ``Tenant.settings`` and ``Agent.settings``; an agent's keys replace the
tenant's one by one (an agent that sets ``mode`` keeps the tenant's limits). Every key is optional:

======================  ================  ===========================================================
key                     default           meaning
======================  ================  ===========================================================
``mode``                ``off``           ``off``, ``non-main`` (all agents but main/default), ``all``
``scope``               ``session``       a container per ``session``, per ``agent``, or ``shared``
``workspace_access``    ``rw``            the workspace at ``/workspace``: ``rw``, ``ro`` or ``none``
``image``               server default    one of the images the server allows (``TOOLGATE_SANDBOX_IMAGES``)
``memory_mb``           512               16 … 16384; no swap beyond it
``cpus``                1.0               0.1 … 16
``pids_limit``          256               16 … 4096
``timeout_seconds``     300               1 … 3600, a command's limit inside the sandbox
``network``             false             true gives the container Docker's default bridge network
``read_only_root``      true              the image's file system read-only
``tmpfs_size_mb``       64                1 … 1024, each of /tmp, /var/tmp and /run (noexec, nosuid, nodev)
======================  ================  ===========================================================
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings

MODES = ("off", "non-main", "all")
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
    "tmpfs_size_mb": (int, 1, 1024),
}
CHOICES: dict[str, tuple[str, ...]] = {"mode": MODES, "scope": SCOPES, "workspace_access": WORKSPACE_ACCESS}
BOOLEANS = ("network", "read_only_root")
KEYS = (*CHOICES, "image", *NUMBERS, *BOOLEANS)


@dataclass(frozen=True)
class SandboxConfig:
    mode: str = "off"
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
        if "mode" in values and values["mode"] not in MODES:
            kwargs["mode"] = "all"  # a mode that cannot be read sandboxes everything
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

    def applies_to(self, agent_key: str) -> bool:
        """Whether an agent's commands run in the sandbox under this configuration."""
        if self.mode == "all":
            return True
        return self.mode == "non-main" and agent_key not in MAIN_AGENT_KEYS

    def fingerprint(self) -> str:
        """What the container is made from: a change of any of it needs a new container."""
        made_of = {k: v for k, v in asdict(self).items() if k not in ("mode", "timeout_seconds")}
        return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
            errors.append(f'"{key}" must be one of {", ".join(choices)}.')
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
