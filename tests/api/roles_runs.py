"""Role cases for the runs routes (merged into ``test_roles``)."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_runs import make_cron_job, make_run


def targets(tenant: Tenant) -> dict[str, str]:
    made = make_run(tenant, "roles")
    external = make_run(tenant, "roles-ext", runner="external")
    return {
        "run": made["pk"],
        "run_agent": made["key"],
        "external_run": external["pk"],
        "cron_job": make_cron_job(tenant, "roles")["pk"],
    }


CRON = "/api/v1/cron/{cron_job}/"


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
    # A queued run takes no messages yet (409), whoever may write: the role check comes first.
    ("post", "/api/v1/runs/{external_run}/messages", {"role": "assistant", "content": "x"}, Role.MEMBER, 409),
    ("post", "/api/v1/runs/{external_run}/claim", None, Role.MEMBER, 200),
    ("get", "/api/v1/cron/", None, Role.MEMBER, 200),
    (
        "post",
        "/api/v1/cron/",
        {"agent": "roles-run-agent", "name": "new", "schedule": "0 * * * *", "message": "x"},
        Role.ADMIN,
        201,
    ),
    ("get", CRON, None, Role.MEMBER, 200),
    ("patch", CRON, {"enabled": False}, Role.ADMIN, 200),
    ("delete", CRON, None, Role.ADMIN, 204),
    ("post", CRON + "run", None, Role.ADMIN, 202),
    ("get", CRON + "firings/", None, Role.MEMBER, 200),
]
