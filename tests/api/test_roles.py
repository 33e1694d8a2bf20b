"""Each role's allowed and refused actions inside its own tenant (403, nothing changed)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from apps.accounts import services
from apps.audit.models import AuditEvent, ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import RANK, Role
from tests import factories
from tests.api import (
    roles_approvals,
    roles_context_files,
    roles_custom_tools,
    roles_knowledge,
    roles_llm,
    roles_mcp,
    roles_memory,
    roles_messaging,
    roles_policy,
    roles_runs,
    roles_sandbox,
    roles_secure_cli,
    roles_sessions,
    roles_skills,
    roles_teams,
)
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

ROLES = [Role.VIEWER, Role.MEMBER, Role.ADMIN, Role.OWNER]


def _targets(tenant: Tenant) -> dict[str, str]:
    system = Actor.system(tenant)
    agent = services.agent_create(actor=system, key="target", name="Target")
    key, _ = services.api_key_create(actor=system, name="target key", role=Role.VIEWER)
    membership = services.membership_create(
        actor=system, email=f"target@{tenant.slug}.test", role=Role.VIEWER, password=factories.PASSWORD
    )
    return {
        "agent": agent.key,
        "key": str(key.pk),
        "membership": str(membership.pk),
        "audit_event": str(AuditEvent.objects.for_tenant(tenant).filter(verb="agent.created").get().pk),
        "tool_call": str(
            ToolCall.objects.create(
                tenant=tenant,
                agent_key="target",
                tool="datetime",
                decision="allowed",
                status="ok",
                actor_kind="system",
                actor_id="system",
            ).pk
        ),
        **roles_policy.targets(tenant),
        **roles_approvals.targets(tenant),
        **roles_teams.targets(tenant),
        **roles_mcp.targets(tenant),
        **roles_custom_tools.targets(tenant),
        **roles_secure_cli.targets(tenant),
        **roles_sandbox.targets(tenant),
        **roles_context_files.targets(tenant),
        **roles_memory.targets(tenant),
        **roles_knowledge.targets(tenant),
        **roles_skills.targets(tenant),
        **roles_llm.targets(tenant),
        **roles_sessions.targets(tenant),
        **roles_messaging.targets(tenant),
        **roles_runs.targets(tenant),
    }


# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/me/", None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/", None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/{agent}/", None, Role.VIEWER, 200),
    ("post", "/api/v1/agents/", {"key": "new-agent", "name": "New"}, Role.ADMIN, 201),
    ("patch", "/api/v1/agents/{agent}/", {"name": "Renamed"}, Role.ADMIN, 200),
    ("delete", "/api/v1/agents/{agent}/", None, Role.ADMIN, 204),
    ("get", "/api/v1/api-keys/", None, Role.ADMIN, 200),
    ("get", "/api/v1/api-keys/{key}/", None, Role.ADMIN, 200),
    ("post", "/api/v1/api-keys/", {"name": "new key", "role": "viewer"}, Role.OWNER, 201),
    ("delete", "/api/v1/api-keys/{key}/", None, Role.OWNER, 200),
    ("get", "/api/v1/memberships/", None, Role.VIEWER, 200),
    ("get", "/api/v1/memberships/{membership}/", None, Role.VIEWER, 200),
    (
        "post",
        "/api/v1/memberships/",
        {"email": "new@a.test", "role": "viewer", "password": factories.PASSWORD},
        Role.OWNER,
        201,
    ),
    ("patch", "/api/v1/memberships/{membership}/", {"role": "member"}, Role.OWNER, 200),
    ("delete", "/api/v1/memberships/{membership}/", None, Role.OWNER, 204),
    ("get", "/api/v1/audit/events/", None, Role.ADMIN, 200),
    ("get", "/api/v1/audit/events/export/?format=ndjson&verb=agent.created", None, Role.ADMIN, 200),
    ("get", "/api/v1/audit/events/{audit_event}/", None, Role.ADMIN, 200),
    ("get", "/api/v1/tenant/", None, Role.VIEWER, 200),
    ("patch", "/api/v1/tenant/", {"settings": {"sandbox": {"mode": "all"}}}, Role.ADMIN, 200),
    ("get", "/api/v1/tools/catalog/", None, Role.VIEWER, 200),
    ("get", "/api/v1/stats/tool-calls?range=week", None, Role.VIEWER, 200),
    ("get", "/api/v1/stats/top?range=hour", None, Role.VIEWER, 200),
    ("get", "/api/v1/stats/needs-you", None, Role.VIEWER, 200),
    ("get", "/api/v1/tenant/quota", None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/{agent}/tools", None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/{agent}/mcp/resources", None, Role.VIEWER, 200),
    ("get", "/api/v1/agents/{agent}/mcp/prompts", None, Role.VIEWER, 200),
    # Without an MCP server of the agent's, a read and a get find nothing (404; they are tried against a
    # real server in tests/mcp/test_api_features.py).
    ("get", "/api/v1/agents/{agent}/mcp/resources/read?uri=library://readme", None, Role.MEMBER, 404),
    ("post", "/api/v1/agents/{agent}/mcp/prompts/get", {"name": "mcp_lib__summarize"}, Role.MEMBER, 404),
    ("post", "/api/v1/runtime/execute", {"agent": "target", "tool": "datetime"}, Role.MEMBER, 200),
    ("get", "/api/v1/tool-calls/", None, Role.MEMBER, 200),
    ("get", "/api/v1/tool-calls/export/?format=csv", None, Role.MEMBER, 200),
    ("get", "/api/v1/tool-calls/{tool_call}/", None, Role.MEMBER, 200),
    *roles_policy.ACTIONS,
    *roles_approvals.ACTIONS,
    *roles_teams.ACTIONS,
    *roles_mcp.ACTIONS,
    *roles_custom_tools.ACTIONS,
    *roles_secure_cli.ACTIONS,
    *roles_sandbox.ACTIONS,
    *roles_context_files.ACTIONS,
    *roles_memory.ACTIONS,
    *roles_knowledge.ACTIONS,
    *roles_skills.ACTIONS,
    *roles_llm.ACTIONS,
    *roles_sessions.ACTIONS,
    *roles_messaging.ACTIONS,
    *roles_runs.ACTIONS,
]


@pytest.fixture(scope="module")
def matrix_tenant(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[Tenant, dict[str, str]]]:
    """One tenant with every target of the matrix, made once: in a transaction kept open around the
    module's tests (each test runs in a savepoint of it, rolled back after it) and rolled back at the end.
    Making the targets takes longer than most requests they serve."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        tenant = factories.make_tenant("role-matrix")
        ids = _targets(tenant)
    try:
        yield tenant, ids
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


# Every test starts the shared tenant at a configuration version of its own: what a process keeps per
# (tenant, version) (the resolved policy, runtime agents, custom tools) then never carries a change a
# rolled-back test made into the next one, as it never does across committed changes.
_VERSIONS = itertools.count(1_000_000, 1_000)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("method", "template", "body", "least", "success"), ACTIONS, ids=[f"{a[0]} {a[1]}" for a in ACTIONS]
)
def test_role_matrix(role, method, template, body, least, success, matrix_tenant):
    tenant, ids = matrix_tenant
    Tenant.objects.filter(pk=tenant.pk).update(config_version=next(_VERSIONS))
    tenant.refresh_from_db()
    client = factories.key_client(factories.make_api_key(tenant, role))
    before = tenant_state(tenant)

    response = getattr(client, method)(template.format(**ids), body, format="json")

    if RANK[role] >= RANK[least]:
        assert response.status_code == success, response.content
    else:
        assert response.status_code == 403, response.content
        error = response.json()["error"]
        assert error["code"] == "permission_denied"
        assert least in error["message"]
        assert role in error["message"]
        assert tenant_state(tenant) == before


def test_an_owner_may_mint_an_owner_key(tenant_a):
    # Owners manage keys; a key may carry any role up to its creator's (the service refuses more:
    # tests/unit/test_services.py).
    owner = factories.key_client(factories.make_api_key(tenant_a, Role.OWNER))
    response = owner.post("/api/v1/api-keys/", {"name": "peer", "role": "owner"}, format="json")
    assert response.status_code == 201
    assert response.json()["role"] == "owner"
