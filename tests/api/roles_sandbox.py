"""Role-matrix actions for the routes of the sandbox (merged into ``test_roles.ACTIONS``)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = []


def targets(tenant: Tenant) -> dict[str, str]:
    return {}
