"""Template context shared by every dashboard page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from apps.dashboard.navigation import nav_items


def dashboard(request: HttpRequest) -> dict[str, Any]:
    actor = getattr(request, "actor", None)
    match = getattr(request, "resolver_match", None)
    return {
        "actor": actor,
        "tenant_memberships": getattr(request, "tenant_memberships", []),
        "nav": nav_items(actor, match.url_name if match is not None else None),
    }
