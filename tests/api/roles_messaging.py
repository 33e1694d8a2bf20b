"""Role cases for the messaging routes (merged into ``test_roles``): channels are administrators' only."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_messaging import make_channel

CHANNELS = "/api/v1/channels/"
CHANNEL = CHANNELS + "{messaging_channel}/"
NEW = {"name": "added", "kind": "webhook", "url": "https://hooks.messaging.invalid/in"}


def targets(tenant: Tenant) -> dict[str, str]:
    return {"messaging_channel": make_channel(tenant, "roles-channel")["pk"]}


# URLs under .invalid never resolve (RFC 6761): the test send answers 200 with ok false.
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", CHANNELS, None, Role.ADMIN, 200),
    ("get", CHANNEL, None, Role.ADMIN, 200),
    ("post", CHANNELS, NEW, Role.ADMIN, 201),
    ("post", CHANNEL + "test", {}, Role.ADMIN, 200),
    ("get", CHANNEL + "messages/", None, Role.ADMIN, 200),
    ("patch", CHANNEL, {"enabled": False}, Role.ADMIN, 200),
    ("delete", CHANNEL, None, Role.ADMIN, 204),
]
