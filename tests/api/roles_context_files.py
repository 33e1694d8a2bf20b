"""Role-matrix actions for the routes of context files (merged into ``test_roles.ACTIONS``). URL templates
may use the targets of ``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_context_files import make_context_files

FILES = "/api/v1/agents/{ctx_agent}/context-files/"
USER = FILES + "users/{ctx_user}/"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", FILES, None, Role.VIEWER, 200),
    ("get", FILES + "SOUL.md", None, Role.VIEWER, 200),
    ("put", FILES + "SOUL.md", {"content": "a new soul"}, Role.ADMIN, 200),
    ("put", FILES + "TOOLS.md", {"content": ""}, Role.ADMIN, 200),
    ("delete", FILES + "SOUL.md", None, Role.ADMIN, 204),
    ("get", USER, None, Role.VIEWER, 200),
    ("get", USER + "USER.md", None, Role.VIEWER, 200),
    ("delete", USER + "USER.md", None, Role.ADMIN, 204),
    ("get", USER + "bootstrap", None, Role.VIEWER, 200),
    ("delete", USER + "bootstrap", None, Role.ADMIN, 204),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_context_files(tenant, "roles")
    return {"ctx_agent": made["key"], "ctx_user": made["user_id"]}
