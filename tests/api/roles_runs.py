"""Role cases for the runs routes (merged into ``test_roles``)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_runs import make_run


def targets(tenant: Tenant) -> dict[str, str]:
    made = make_run(tenant, "roles")
    return {"run": made["pk"], "run_agent": made["key"]}


ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/agents/{run_agent}/runs", None, Role.MEMBER, 200),
    (
        "post",
        "/api/v1/agents/{run_agent}/runs",
        {"session_key": "new-chat", "message": "hello", "wait": False},
        Role.MEMBER,
        202,
    ),
    ("get", "/api/v1/runs/", None, Role.MEMBER, 200),
    ("get", "/api/v1/runs/{run}/", None, Role.MEMBER, 200),
    ("post", "/api/v1/runs/{run}/cancel", None, Role.MEMBER, 200),
]
