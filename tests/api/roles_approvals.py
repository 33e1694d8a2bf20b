"""Role-matrix actions for the routes of pending approvals, decisions and allow-always rules (merged into
``test_roles.ACTIONS``). URL templates may use the targets of ``test_roles._targets`` and of
``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_approvals import make_approval, make_rule

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/approvals/", None, Role.ADMIN, 200),
    ("get", "/api/v1/approvals/?status=pending", None, Role.ADMIN, 200),
    ("get", "/api/v1/approvals/{approval}/", None, Role.ADMIN, 200),
    ("post", "/api/v1/approvals/{approval}/decide", {"decision": "deny", "reason": "no"}, Role.ADMIN, 200),
    ("post", "/api/v1/approvals/{approval}/decide", {"decision": "allow-always"}, Role.ADMIN, 200),
    ("get", "/api/v1/approval-rules/", None, Role.ADMIN, 200),
    ("get", "/api/v1/approval-rules/{rule}/", None, Role.ADMIN, 200),
    ("delete", "/api/v1/approval-rules/{rule}/", None, Role.ADMIN, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    rule = make_rule(tenant)["pk"]
    return {"approval": make_approval(tenant)["pk"], "rule": rule}
