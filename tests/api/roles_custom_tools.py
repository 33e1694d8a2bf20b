"""Role-matrix actions for the routes of custom tools (merged into ``test_roles.ACTIONS``). URL templates may
use the targets of ``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_custom_tools import make_custom_tools

TOOLS = "/api/v1/custom-tools/"
TOOL = TOOLS + "{custom_tool}"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", TOOLS, None, Role.VIEWER, 200),
    ("get", TOOLS + "?scope=global&enabled=true&name=roles_lookup", None, Role.VIEWER, 200),
    (
        "post",
        TOOLS,
        {"name": "new_tool", "command": "echo new", "env": {"API_TOKEN": "a-new-secret"}},
        Role.ADMIN,
        201,
    ),
    ("get", TOOL + "/", None, Role.VIEWER, 200),
    ("patch", TOOL + "/", {"description": "changed", "timeout_seconds": 30}, Role.ADMIN, 200),
    ("delete", TOOL + "/", None, Role.ADMIN, 204),
    ("post", TOOL + "/test", {"agent": "target", "args": {"word": "hello"}}, Role.ADMIN, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_custom_tools(tenant, "roles")
    return {"custom_tool": made["tool"], "custom_tool_agent": made["agent"]}
