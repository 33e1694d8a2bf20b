"""Role-matrix actions for the routes of the sandbox (merged into ``test_roles.ACTIONS``): administrators
and owners only, every method."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_sandbox import make_sandbox_container

CONTAINERS = "/api/v1/sandbox/containers/"
CONTAINER = CONTAINERS + "{sandbox_container}/"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/sandbox/", None, Role.ADMIN, 200),
    ("get", CONTAINERS, None, Role.ADMIN, 200),
    ("get", CONTAINERS + "?usage=false", None, Role.ADMIN, 200),
    ("get", CONTAINER, None, Role.ADMIN, 200),
    ("delete", CONTAINER, None, Role.ADMIN, 204),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    return {"sandbox_container": str(make_sandbox_container(tenant, "roles").pk)}
