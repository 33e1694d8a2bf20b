"""Role-matrix actions for the routes of teams, tasks, escalations and team events (merged into
``test_roles.ACTIONS``). URL templates may use the targets of ``test_roles._targets`` and of
``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_teams import make_board

TEAM = "/api/v1/teams/{team}"
TASK = TEAM + "/tasks/{task_pending}"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/teams/", None, Role.VIEWER, 200),
    ("get", "/api/v1/teams/?status=active", None, Role.VIEWER, 200),
    (
        "post",
        "/api/v1/teams/",
        {"name": "New team", "lead": "roles-dave", "members": ["roles-carol"]},
        Role.ADMIN,
        201,
    ),
    ("get", TEAM + "/", None, Role.VIEWER, 200),
    ("patch", TEAM + "/", {"settings": {"blocker_escalation": {"enabled": False}}}, Role.ADMIN, 200),
    ("patch", TEAM + "/", {"name": "Renamed", "description": "Ships things"}, Role.ADMIN, 200),
    ("delete", TEAM + "/", None, Role.ADMIN, 200),
    ("get", TEAM + "/members/", None, Role.VIEWER, 200),
    ("post", TEAM + "/members/", {"agent": "roles-carol"}, Role.ADMIN, 201),
    ("delete", TEAM + "/members/{member}/", None, Role.ADMIN, 204),
    ("get", TEAM + "/tasks/", None, Role.VIEWER, 200),
    ("get", TEAM + "/tasks/?status=active&q=work&page=1", None, Role.VIEWER, 200),
    ("post", TEAM + "/tasks/", {"subject": "New task", "priority": 3}, Role.MEMBER, 201),
    ("get", TASK + "/", None, Role.VIEWER, 200),
    ("patch", TASK + "/", {"priority": 5}, Role.MEMBER, 200),
    ("delete", TEAM + "/tasks/{task_done}/", None, Role.MEMBER, 204),
    ("post", TASK + "/assign", {"agent": "roles-bob"}, Role.MEMBER, 200),
    ("post", TASK + "/cancel", {"reason": "not needed"}, Role.MEMBER, 200),
    ("post", TEAM + "/tasks/{task_failed}/retry", {"reason": "try again"}, Role.MEMBER, 200),
    ("post", TEAM + "/tasks/{task_review}/approve", None, Role.MEMBER, 200),
    ("post", TEAM + "/tasks/{task_review}/reject", {"reason": "not this"}, Role.MEMBER, 200),
    ("post", TASK + "/comment", {"text": "a note"}, Role.MEMBER, 201),
    ("get", TEAM + "/escalations/", None, Role.VIEWER, 200),
    ("get", TEAM + "/escalations/?state=open", None, Role.VIEWER, 200),
    ("post", TEAM + "/escalations/{escalation}/resolve", None, Role.MEMBER, 200),
    ("get", TEAM + "/events/", None, Role.VIEWER, 200),
    ("get", TEAM + "/events/?event_type=created", None, Role.VIEWER, 200),
    ("get", TEAM + "/grants/", None, Role.VIEWER, 200),
    ("post", TEAM + "/grants/", {"user_id": "ana@a.test", "role": "operator"}, Role.ADMIN, 201),
    ("delete", TEAM + "/grants/{grant}/", None, Role.ADMIN, 204),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    return make_board(tenant, "Roles")
