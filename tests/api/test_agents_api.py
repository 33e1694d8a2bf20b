from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.tenants.models import Agent
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def test_create_read_update_delete_agent_with_audit(admin_a, tenant_a):
    created = admin_a.post(
        "/api/v1/agents/",
        {"key": "support-bot", "name": "Support", "type": "predefined", "settings": {"temperature": 0.2}},
        format="json",
    )
    assert created.status_code == 201
    assert created.json()["key"] == "support-bot"
    assert created.json()["type"] == "predefined"

    fetched = admin_a.get("/api/v1/agents/support-bot/")
    assert fetched.json()["settings"] == {"temperature": 0.2}

    updated = admin_a.patch(
        "/api/v1/agents/support-bot/", {"name": "Support desk", "model": "m-1"}, format="json"
    )
    assert updated.status_code == 200
    assert updated.json()["name"] == "Support desk"
    assert updated.json()["model"] == "m-1"

    assert admin_a.delete("/api/v1/agents/support-bot/").status_code == 204
    assert admin_a.get("/api/v1/agents/support-bot/").status_code == 404

    verbs = list(
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(target_type="agent")
        .order_by("created_at")
        .values_list("verb", flat=True)
    )
    assert verbs == ["agent.created", "agent.updated", "agent.deleted"]
    change = AuditEvent.objects.for_tenant(tenant_a).get(verb="agent.updated")
    assert change.data["changes"] == {
        "name": {"from": "Support", "to": "Support desk"},
        "model": {"from": "", "to": "m-1"},
    }
    assert change.actor_kind == "api_key"
    assert change.request_id


def test_unchanged_update_writes_no_audit_event(admin_a, tenant_a):
    admin_a.post("/api/v1/agents/", {"key": "same", "name": "Same"}, format="json")
    count = AuditEvent.objects.for_tenant(tenant_a).count()
    assert admin_a.patch("/api/v1/agents/same/", {"name": "Same"}, format="json").status_code == 200
    assert AuditEvent.objects.for_tenant(tenant_a).count() == count


def test_duplicate_key_is_a_conflict_and_changes_nothing(admin_a, tenant_a):
    admin_a.post("/api/v1/agents/", {"key": "dup", "name": "First"}, format="json")
    before = tenant_state(tenant_a)
    response = admin_a.post("/api/v1/agents/", {"key": "dup", "name": "Second"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate_agent_key"
    assert tenant_state(tenant_a) == before


def test_the_same_key_may_exist_in_two_tenants(admin_a, outsider):
    assert admin_a.post("/api/v1/agents/", {"key": "shared", "name": "A"}, format="json").status_code == 201
    assert outsider.post("/api/v1/agents/", {"key": "shared", "name": "B"}, format="json").status_code == 201
    assert admin_a.get("/api/v1/agents/shared/").json()["name"] == "A"
    assert outsider.get("/api/v1/agents/shared/").json()["name"] == "B"


def test_key_cannot_be_changed(admin_a):
    admin_a.post("/api/v1/agents/", {"key": "fixed", "name": "Fixed"}, format="json")
    response = admin_a.patch("/api/v1/agents/fixed/", {"key": "moved"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"key": ["Unknown field."]}


def test_list_is_paginated_searchable_and_bounded_in_queries(
    admin_a, tenant_a, django_assert_max_num_queries
):
    for i in range(60):
        Agent.objects.create(tenant=tenant_a, key=f"agent-{i:02d}", name=f"Agent {i}")
    with django_assert_max_num_queries(4):
        page = admin_a.get("/api/v1/agents/")
    body = page.json()
    assert body["count"] == 60
    assert len(body["results"]) == 50
    assert body["results"][0]["key"] == "agent-00"
    assert admin_a.get("/api/v1/agents/?page=2").json()["results"][-1]["key"] == "agent-59"
    assert [a["key"] for a in admin_a.get("/api/v1/agents/?search=agent-1").json()["results"]] == [
        f"agent-1{i}" for i in range(10)
    ]


def test_unauthenticated_is_401_with_envelope(anonymous):
    response = anonymous.get("/api/v1/agents/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")
