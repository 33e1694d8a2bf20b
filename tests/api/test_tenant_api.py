"""GET/PATCH /api/v1/tenant/: the tenant's name and runtime settings, with GoClaw's defaults."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def test_a_new_tenant_has_the_documented_defaults(viewer_a, tenant_a):
    body = viewer_a.get("/api/v1/tenant/").json()
    assert body["slug"] == tenant_a.slug
    assert body["settings"] == {}
    assert body["runtime"] == {"sandbox": {"mode": "jail"}, "tools": {}, "runner": "external"}


def test_admins_change_settings_audited_and_null_removes_a_key(admin_a, tenant_a):
    response = admin_a.patch(
        "/api/v1/tenant/",
        {"settings": {"sandbox": {"mode": "all"}, "tools": {"exec": {"timeout": 60}}}},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["runtime"]["sandbox"] == {"mode": "all"}
    assert response.json()["runtime"]["tools"] == {"exec": {"timeout": 60}}
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="tenant.updated")
    assert event.data["changes"]["settings.sandbox"] == {"from": None, "to": {"mode": "all"}}
    cleared = admin_a.patch("/api/v1/tenant/", {"settings": {"sandbox": None}}, format="json").json()
    assert cleared["settings"] == {"tools": {"exec": {"timeout": 60}}}
    assert cleared["runtime"]["sandbox"] == {"mode": "jail"}


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"sandbox": {"mode": "maybe"}}, 'sandbox: "mode" must be one of jail, docker, host.'),
        ({"sandbox": "all"}, "sandbox: Must be an object"),
        ({"tools": {"nosuchtool": {}}}, "tools: Unknown tools: nosuchtool."),
        ({"tools": {"exec": 5}}, "tools: Must be an object of tool name -> settings object."),
    ],
)
def test_invalid_settings_are_refused_with_nothing_changed(admin_a, tenant_a, settings, fragment):
    before = tenant_state(tenant_a)
    response = admin_a.patch("/api/v1/tenant/", {"settings": settings}, format="json")
    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
    assert tenant_state(tenant_a) == before


TENANT_POLICY = "PUT /api/v1/policy/tenant/"
AGENT_POLICY = "PUT /api/v1/policy/agents/<key>/"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"tool_profile": "coding"},
            f"tool_profile: tool_profile is now the policy's profile: {TENANT_POLICY} "
            f"(one agent's tools: its allow list, {AGENT_POLICY}).",
        ),
        (
            {"scrub_credentials": False},
            f"scrub_credentials: scrub_credentials is now the policy's scrub_credentials: {TENANT_POLICY}.",
        ),
        (
            {"rate_limit_per_hour": 30},
            "rate_limit_per_hour: rate_limit_per_hour is now the policy's rate_limit_per_hour: "
            f"{TENANT_POLICY}.",
        ),
        (
            {"exec_approvals": {"security": "deny"}},
            f"exec_approvals: exec_approvals is now the policy's execApproval: {TENANT_POLICY} "
            f"(one agent's: {AGENT_POLICY}).",
        ),
        (
            {"origin_deny": {"comm": ["exec"]}},
            f"origin_deny: origin_deny is now the policy's originDeny: {TENANT_POLICY}.",
        ),
        (
            {"tools": {"exec": {"deny_groups": {"package_install": False}}}},
            f"tools: tools.exec.deny_groups is now the policy's shellDenyGroups: {TENANT_POLICY} "
            f"(one agent's: {AGENT_POLICY}).",
        ),
    ],
)
def test_policy_keys_are_refused_in_settings_with_where_they_went(admin_a, tenant_a, settings, message):
    before = tenant_state(tenant_a)
    response = admin_a.patch("/api/v1/tenant/", {"settings": settings}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["settings"] == [message]
    created = admin_a.post("/api/v1/agents/", {"key": "a", "name": "A", "settings": settings}, format="json")
    assert created.status_code == 400
    assert created.json()["error"]["details"]["settings"] == [message]
    assert tenant_state(tenant_a) == before


def test_agent_settings_are_validated_the_same_way(admin_a):
    response = admin_a.post(
        "/api/v1/agents/", {"key": "a", "name": "A", "settings": {"sandbox": {"mode": "x"}}}, format="json"
    )
    assert response.status_code == 400
    [message] = response.json()["error"]["details"]["settings"]
    assert 'sandbox: "mode" must be one of jail, docker, host.' in message


def test_members_cannot_change_the_tenant(member_a, tenant_a):
    before = tenant_state(tenant_a)
    response = member_a.patch("/api/v1/tenant/", {"name": "Mine now"}, format="json")
    assert response.status_code == 403
    assert tenant_state(tenant_a) == before
