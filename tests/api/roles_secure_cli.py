"""Role-matrix actions for the routes of credentialed CLIs (merged into ``test_roles.ACTIONS``). URL
templates may use the targets of ``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = []


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    return {}
