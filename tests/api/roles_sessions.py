"""Role cases for the sessions routes (merged into ``test_roles``)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_sessions import make_session


def targets(tenant: Tenant) -> dict[str, str]:
    made = make_session(tenant, "roles")
    return {"session": made["pk"], "session_agent": "roles-session-agent"}


SESSION = "/api/v1/sessions/{session}/"

ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/sessions/", None, Role.MEMBER, 200),
    ("post", "/api/v1/sessions/", {"agent": "roles-session-agent", "key": "new-session"}, Role.MEMBER, 201),
    ("get", SESSION, None, Role.MEMBER, 200),
    ("patch", SESSION, {"label": "renamed"}, Role.ADMIN, 200),
    ("delete", SESSION, None, Role.ADMIN, 204),
    ("get", SESSION + "messages/", None, Role.MEMBER, 200),
    ("post", SESSION + "messages/", {"role": "user", "content": "hello"}, Role.MEMBER, 201),
]
