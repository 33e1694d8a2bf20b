"""Role cases for the messaging routes (merged into ``test_roles``)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant


def targets(tenant: Tenant) -> dict[str, str]:
    return {}


ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = []
