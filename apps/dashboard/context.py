"""Template context shared by every dashboard page."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def dashboard(request: HttpRequest) -> dict[str, Any]:
    return {
        "actor": getattr(request, "actor", None),
        "tenant_memberships": getattr(request, "tenant_memberships", []),
    }
