"""Role-matrix actions for the routes of credentialed CLIs (merged into ``test_roles.ACTIONS``). URL
templates may use the targets of ``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_secure_cli import make_secure_cli

LIST = "/api/v1/secure-cli/"
BINARY = LIST + "{cli_binary}/"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", LIST, None, Role.VIEWER, 200),
    ("post", LIST, {"binary_name": "new-cli", "env": {"NEW_TOKEN": "a-new-token"}}, Role.ADMIN, 201),
    ("post", LIST, {"preset": "gh", "env": {"GH_TOKEN": "ghp-roles-token"}}, Role.ADMIN, 201),
    ("get", LIST + "presets/", None, Role.VIEWER, 200),
    ("get", BINARY, None, Role.VIEWER, 200),
    ("patch", BINARY, {"tips": "Use --json", "timeout_seconds": 45}, Role.ADMIN, 200),
    ("delete", BINARY, None, Role.ADMIN, 204),
    ("post", BINARY + "test", {"agent": "roles-cli-agent", "args": ["--version"]}, Role.ADMIN, 200),
    ("get", BINARY + "grants/", None, Role.ADMIN, 200),
    ("get", BINARY + "grants/{cli_agent}/", None, Role.ADMIN, 200),
    ("put", BINARY + "grants/{cli_agent}/", {"deny_verbose": ["-v"]}, Role.ADMIN, 200),
    ("put", BINARY + "grants/{agent}/", {"timeout_seconds": 20}, Role.ADMIN, 201),
    ("delete", BINARY + "grants/{cli_agent}/", None, Role.ADMIN, 204),
    ("get", BINARY + "credentials/", None, Role.ADMIN, 200),
    ("put", BINARY + "credentials/{cli_user}/", {"env": {"CLI_TOKEN": "replaced-token"}}, Role.ADMIN, 200),
    ("put", BINARY + "credentials/new-user@a.test/", {"env": {"CLI_TOKEN": "fresh-token"}}, Role.ADMIN, 201),
    ("delete", BINARY + "credentials/{cli_user}/", None, Role.ADMIN, 204),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_secure_cli(tenant, prefix="roles")
    return {"cli_binary": made["binary"], "cli_agent": made["agent"], "cli_user": made["user"]}
