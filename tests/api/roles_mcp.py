"""Role-matrix actions for the routes of MCP servers, grants and access requests (merged into
``test_roles.ACTIONS``). URL templates may use the targets of ``test_roles._targets`` and of
``targets`` here.

One request (``GET /api/v1/mcp/requests/<id>/``) is not here: below admin, someone else's request is
404 rather than 403 (``tests/mcp/test_api_personas.py`` covers it)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_mcp import make_mcp

SERVER = "/api/v1/mcp/servers/{mcp_server}"
REQUESTS = "/api/v1/mcp/requests/"
REQUEST = REQUESTS + "{mcp_request}"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/mcp/servers/", None, Role.VIEWER, 200),
    (
        "post",
        "/api/v1/mcp/servers/",
        {"name": "new-server", "transport": "stdio", "command": "npx", "args": ["-y", "pkg"]},
        Role.ADMIN,
        201,
    ),
    ("get", SERVER + "/", None, Role.VIEWER, 200),
    ("patch", SERVER + "/", {"timeout_sec": 30, "display_name": "Renamed"}, Role.ADMIN, 200),
    ("delete", SERVER + "/", None, Role.ADMIN, 204),
    ("get", SERVER + "/tools/", None, Role.VIEWER, 200),
    ("get", SERVER + "/grants/", None, Role.ADMIN, 200),
    ("get", SERVER + "/grants/agents/{mcp_agent}/", None, Role.ADMIN, 200),
    ("put", SERVER + "/grants/agents/{mcp_agent}/", {"tool_deny": ["roles_tool"]}, Role.ADMIN, 200),
    ("put", SERVER + "/grants/agents/{agent}/", {"tool_allow": ["roles_tool"]}, Role.ADMIN, 201),
    ("delete", SERVER + "/grants/agents/{mcp_agent}/", None, Role.ADMIN, 204),
    ("get", SERVER + "/grants/users/{mcp_user}/", None, Role.ADMIN, 200),
    ("put", SERVER + "/grants/users/{mcp_user}/", {"enabled": False}, Role.ADMIN, 200),
    ("put", SERVER + "/grants/users/new-user@a.test/", {}, Role.ADMIN, 201),
    ("delete", SERVER + "/grants/users/{mcp_user}/", None, Role.ADMIN, 204),
    ("get", SERVER + "/credentials/", None, Role.ADMIN, 200),
    ("put", SERVER + "/credentials/{mcp_user}/", {"headers": {"X-Token": "t"}}, Role.ADMIN, 200),
    ("put", SERVER + "/credentials/new-user@a.test/", {"api_key": "k"}, Role.ADMIN, 201),
    ("delete", SERVER + "/credentials/{mcp_user}/", None, Role.ADMIN, 204),
    ("get", "/api/v1/agents/{mcp_agent}/mcp-grants/", None, Role.ADMIN, 200),
    ("get", REQUESTS, None, Role.VIEWER, 200),
    ("get", REQUESTS + "?status=pending&scope=agent&server=roles-server", None, Role.VIEWER, 200),
    (
        "post",
        REQUESTS,
        {"server": "roles-server", "scope": "agent", "agent": "target", "reason": "nightly reports"},
        Role.MEMBER,
        201,
    ),
    ("post", REQUEST + "/approve", {"note": "fine", "tool_allow": ["roles_tool"]}, Role.ADMIN, 200),
    ("post", REQUEST + "/reject", {"note": "not now"}, Role.ADMIN, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_mcp(tenant, "roles")
    return {
        "mcp_server": made["server"],
        "mcp_agent": made["agent"],
        "mcp_user": made["user"],
        "mcp_request": made["request"],
    }
