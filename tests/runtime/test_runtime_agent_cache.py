"""The agent cache of the hot path (``access.access_runtime_agent``): it saves execute's agent query, and a
change to an agent is seen by the very next call, because every change raises the tenant's
``config_version``, which each request reads with its tenant."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant

pytestmark = pytest.mark.django_db


def execute(client, tool="datetime", agent="bot"):
    response = client.post(
        "/api/v1/runtime/execute", {"agent": agent, "tool": tool, "args": {"timezone": "UTC"}}, format="json"
    )
    return response


def version(tenant: Tenant) -> int:
    return Tenant.objects.get(pk=tenant.pk).config_version


def test_an_unchanged_agent_is_not_queried_again(member_a, tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    assert execute(member_a).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert execute(member_a).status_code == 200
    assert not [q for q in queries.captured_queries if '"tenants_agent"' in q["sql"].split("WHERE")[0]]


def test_an_agent_or_policy_change_applies_to_the_next_call(member_a, admin_a, tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    assert execute(member_a).json()["is_error"] is False  # cached now
    before = version(tenant_a)
    response = admin_a.patch("/api/v1/agents/bot/", {"settings": {"temperature": 0.1}}, format="json")
    assert response.status_code == 200, response.content
    assert version(tenant_a) == before + 1
    assert execute(member_a).json()["is_error"] is False
    agent = Agent.objects.for_tenant(tenant_a).get(key="bot")
    policy_services.policy_save(
        Actor.system(tenant_a), policy_services.target("agent", agent=agent), {"allow": ["session_status"]}
    )
    assert version(tenant_a) == before + 2
    body = execute(member_a).json()
    assert body["is_error"] is True
    assert body["for_llm"] == "tool not allowed by policy: datetime"


def test_a_deleted_agent_is_gone_and_a_new_one_with_its_key_is_used(member_a, admin_a, tenant_a):
    old = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    assert execute(member_a).status_code == 200
    assert admin_a.delete("/api/v1/agents/bot/").status_code == 204
    assert execute(member_a).status_code == 404
    response = admin_a.post("/api/v1/agents/", {"key": "bot", "name": "Bot 2"}, format="json")
    assert response.status_code == 201, response.content
    body = execute(member_a).json()
    call = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert call.agent_id != old.pk
    assert str(call.agent_id) == response.json()["id"]


def test_tenant_settings_changes_raise_the_version_and_name_changes_do_not(owner_a, tenant_a):
    before = version(tenant_a)
    assert owner_a.patch("/api/v1/tenant/", {"name": "Renamed"}, format="json").status_code == 200
    assert version(tenant_a) == before
    response = owner_a.patch("/api/v1/tenant/", {"settings": {"sandbox": {"mode": "all"}}}, format="json")
    assert response.status_code == 200, response.content
    assert version(tenant_a) == before + 1


def test_each_tenant_gets_its_own_agent_for_the_same_key(member_a, tenant_a, tenant_b):
    from tests.factories import key_client, make_api_key

    mine = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="A's bot")
    theirs = services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    policy_services.policy_save(
        Actor.system(tenant_b), policy_services.target("agent", agent=theirs), {"allow": ["session_status"]}
    )
    member_b = key_client(make_api_key(tenant_b, "member"))
    for _ in range(2):  # the second round is served from the cache
        body_a = execute(member_a).json()
        body_b = execute(member_b).json()
        assert body_a["is_error"] is False
        assert body_b["for_llm"] == "tool not allowed by policy: datetime"
        assert ToolCall.objects.for_tenant(tenant_a).get(pk=body_a["call_id"]).agent_id == mine.pk
        assert ToolCall.objects.for_tenant(tenant_b).get(pk=body_b["call_id"]).agent_id == theirs.pk
