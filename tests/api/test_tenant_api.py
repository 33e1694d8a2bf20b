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
    assert body["runtime"] == {
        "tool_profile": "full",
        "scrub_credentials": True,
        "rate_limit_per_hour": 150,
        "exec_approvals": {"security": "full", "ask": "off"},
        "sandbox": {"mode": "off"},
        "origin_deny": {},
        "tools": {},
    }


def test_admins_change_settings_audited_and_null_removes_a_key(admin_a, tenant_a):
    response = admin_a.patch(
        "/api/v1/tenant/", {"settings": {"rate_limit_per_hour": 30, "tool_profile": "coding"}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["runtime"]["rate_limit_per_hour"] == 30
    assert response.json()["runtime"]["tool_profile"] == "coding"
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="tenant.updated")
    assert event.data["changes"]["settings.rate_limit_per_hour"] == {"from": None, "to": 30}
    cleared = admin_a.patch("/api/v1/tenant/", {"settings": {"tool_profile": None}}, format="json").json()
    assert cleared["settings"] == {"rate_limit_per_hour": 30}
    assert cleared["runtime"]["tool_profile"] == "full"


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"tool_profile": "everything"}, "tool_profile: Unknown profile"),
        ({"rate_limit_per_hour": -1}, "rate_limit_per_hour: Must be an integer"),
        ({"scrub_credentials": "yes"}, "scrub_credentials: Must be true or false."),
        ({"exec_approvals": {"security": "lax"}}, "security must be one of deny, allowlist, full."),
        ({"sandbox": {"mode": "maybe"}}, "sandbox: Must be an object"),
        ({"origin_deny": {"moon": ["exec"]}}, "Unknown origin 'moon'"),
        ({"origin_deny": {"comm": ["nosuchtool"]}}, "comm: must be a list of catalog tool names."),
        ({"tools": {"nosuchtool": {}}}, "tools: Unknown tools: nosuchtool."),
        (
            {"tools": {"exec": {"deny_groups": {"no_such_group": False}}}},
            "unknown deny group 'no_such_group'",
        ),
    ],
)
def test_invalid_settings_are_refused_with_nothing_changed(admin_a, tenant_a, settings, fragment):
    before = tenant_state(tenant_a)
    response = admin_a.patch("/api/v1/tenant/", {"settings": settings}, format="json")
    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
    assert tenant_state(tenant_a) == before


def test_agent_settings_are_validated_the_same_way(admin_a):
    response = admin_a.post(
        "/api/v1/agents/", {"key": "a", "name": "A", "settings": {"tool_profile": "x"}}, format="json"
    )
    assert response.status_code == 400
    assert "tool_profile: Unknown profile" in response.json()["error"]["details"]["settings"][0]


def test_members_cannot_change_the_tenant(member_a, tenant_a):
    before = tenant_state(tenant_a)
    response = member_a.patch("/api/v1/tenant/", {"name": "Mine now"}, format="json")
    assert response.status_code == 403
    assert tenant_state(tenant_a) == before
