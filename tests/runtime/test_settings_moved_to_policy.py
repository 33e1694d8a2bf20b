"""The migration that moves the policy values out of tenant and agent settings (tenants 0006): the
documents and versions it writes, the settings it leaves, and that execution then follows the policy."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as global_apps

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.policy import services as policy_services
from apps.policy.models import PolicyDocument, PolicyVersion
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant

pytestmark = pytest.mark.django_db

move = importlib.import_module("apps.tenants.migrations.0006_policy_from_settings")


def raw_settings(target: Tenant | Agent, settings: dict[str, Any]) -> None:
    """Settings as they were stored before the move (the validator refuses these keys now)."""
    if isinstance(target, Agent):
        Agent.objects.for_tenant(target.tenant).filter(pk=target.pk).update(settings=settings)
    else:
        Tenant.objects.filter(pk=target.pk).update(settings=settings)


def agent_settings(agent: Agent) -> dict[str, Any]:
    return Agent.objects.for_tenant(agent.tenant).get(pk=agent.pk).settings


def document(tenant: Tenant, agent: Agent | None = None) -> dict[str, Any] | None:
    rows = PolicyDocument.objects.for_tenant(tenant).filter(scope="agent" if agent else "tenant")
    row = rows.filter(agent=agent).first() if agent else rows.first()
    return row.document if row is not None else None


def run_migration() -> None:
    move.forwards(global_apps, None)


def test_tenant_values_become_the_tenant_policy(tenant_a, tenant_b):
    raw_settings(
        tenant_a,
        {
            "tool_profile": "coding",
            "scrub_credentials": False,
            "rate_limit_per_hour": 20,
            "exec_approvals": {"security": "allowlist", "ask": "on-miss"},
            "origin_deny": {"comm": ["exec"]},
            "sandbox": {"mode": "all"},
            "tools": {"exec": {"deny_groups": {"package_install": False}, "timeout": 30}},
            "theme": "dark",
        },
    )
    before_a = Tenant.objects.get(pk=tenant_a.pk).config_version
    before_b = Tenant.objects.get(pk=tenant_b.pk).config_version

    run_migration()

    assert document(tenant_a) == {
        "profile": "coding",
        "scrub_credentials": False,
        "rate_limit_per_hour": 20,
        "execApproval": {"security": "allowlist", "ask": "on-miss"},
        "originDeny": {"comm": ["exec"]},
        "shellDenyGroups": {"package_install": False},
    }
    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert tenant.settings == {
        "sandbox": {"mode": "all"},
        "tools": {"exec": {"timeout": 30}},
        "theme": "dark",
    }
    tenant.full_clean(exclude=["slug"])  # what is left passes the settings validator
    assert tenant.config_version == before_a + 1
    version = PolicyVersion.objects.for_tenant(tenant_a).get()
    assert (version.number, version.note, version.author_kind) == (1, "moved from settings", "system")
    assert version.diff["profile"] == {"from": None, "to": "coding"}
    assert version.diff["originDeny.comm"] == {"added": ["exec"], "removed": []}
    assert PolicyDocument.objects.for_tenant(tenant_a).get().version == 1
    # An untouched tenant gets nothing and keeps its config_version.
    assert document(tenant_b) is None
    assert Tenant.objects.get(pk=tenant_b.pk).config_version == before_b


def test_agent_values_become_the_agent_policy_and_the_rest_is_dropped(tenant_a):
    system = Actor.system(tenant_a)
    narrow = services.agent_create(actor=system, key="narrow", name="Narrow")
    wide = services.agent_create(actor=system, key="wide", name="Wide")
    plain = services.agent_create(actor=system, key="plain", name="Plain", settings={"temperature": 0.2})
    raw_settings(
        narrow,
        {
            "tool_profile": "minimal",
            "exec_approvals": {"security": "deny"},
            "tools": {"exec": {"deny_groups": {"network_recon": False}}},
            "rate_limit_per_hour": 5,
            "scrub_credentials": False,
            "origin_deny": {"user": ["exec"]},
            "temperature": 0.1,
        },
    )
    raw_settings(wide, {"tool_profile": "full", "rate_limit_per_hour": 5})

    run_migration()

    assert document(tenant_a, narrow) == {
        "allow": ["session_status"],
        "execApproval": {"security": "deny"},
        "shellDenyGroups": {"network_recon": False},
    }
    assert agent_settings(narrow) == {"temperature": 0.1}
    assert document(tenant_a, wide) is None
    assert agent_settings(wide) == {}
    assert agent_settings(plain) == {"temperature": 0.2}
    assert document(tenant_a) is None  # the agents' tenant-only values went nowhere
    version = PolicyVersion.objects.for_tenant(tenant_a).get(agent_key="narrow")
    assert (version.number, version.note) == (1, "moved from settings")


def test_values_already_in_a_document_win_and_allow_lists_intersect(tenant_a):
    system = Actor.system(tenant_a)
    agent = services.agent_create(actor=system, key="bot", name="Bot")
    policy_services.policy_save(system, policy_services.target("tenant"), {"rate_limit_per_hour": 7})
    policy_services.policy_save(
        system, policy_services.target("agent", agent=agent), {"allow": ["read_file", "message", "cron"]}
    )
    raw_settings(tenant_a, {"rate_limit_per_hour": 99, "scrub_credentials": False})
    raw_settings(agent, {"tool_profile": "coding"})

    run_migration()

    assert document(tenant_a) == {"rate_limit_per_hour": 7, "scrub_credentials": False}
    assert document(tenant_a, agent) == {"allow": ["read_file"]}  # coding has fs, not messaging or cron
    numbers = PolicyVersion.objects.for_tenant(tenant_a).filter(agent_key="").values_list("number", "note")
    assert sorted(numbers) == [(1, ""), (2, "moved from settings")]


def test_after_the_move_execution_follows_the_policy(tenant_a, member_a):
    agent = services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    raw_settings(agent, {"tool_profile": "minimal"})

    run_migration()

    response = member_a.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": "datetime", "args": {}}, format="json"
    )
    body = response.json()
    assert body["for_llm"] == "tool not allowed by policy: datetime"
    assert ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"]).decision == "denied"
    listed = member_a.get("/api/v1/agents/bot/tools?include_unavailable=true").json()
    assert [t["function"]["name"] for t in listed["tools"]] == ["session_status"]


def test_running_it_again_changes_nothing(tenant_a):
    raw_settings(tenant_a, {"tool_profile": "minimal"})
    run_migration()
    version = Tenant.objects.get(pk=tenant_a.pk).config_version

    run_migration()

    assert PolicyVersion.objects.for_tenant(tenant_a).count() == 1
    assert Tenant.objects.get(pk=tenant_a.pk).config_version == version
