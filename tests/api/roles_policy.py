"""Role-matrix actions for the routes of policy documents, versions, explain, import/export (merged into
``test_roles.ACTIONS``). URL templates may use the targets of ``test_roles._targets`` and of
``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.policy import services as policy
from apps.policy.models import PolicyVersion, Scope
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role

V, M, A = Role.VIEWER, Role.MEMBER, Role.ADMIN
CHANNEL = "/api/v1/policy/channels/{policy_channel}/"
CHAT = "/api/v1/policy/channels/{policy_channel}/?chat_id={policy_chat}"
VERSION = "/api/v1/policy/versions/{policy_version}/"
PREVIEW = {"scope": "tenant", "document": {"deny": ["exec"]}, "explain_agent": "target"}
BUNDLE = {"format": 1, "tenant": {"deny": ["exec"]}, "agents": {"target": {"deny": ["tts"]}}, "channels": []}

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", "/api/v1/policy/tenant/", None, V, 200),
    ("put", "/api/v1/policy/tenant/", {"document": {"deny": ["exec"]}, "note": "n"}, A, 200),
    ("delete", "/api/v1/policy/tenant/", None, A, 204),
    ("get", "/api/v1/policy/agents/{agent}/", None, V, 200),
    ("put", "/api/v1/policy/agents/{agent}/", {"document": {"deny": ["web_fetch"]}}, A, 200),
    ("delete", "/api/v1/policy/agents/{agent}/", None, A, 204),
    ("get", "/api/v1/policy/channels/", None, V, 200),
    ("get", CHANNEL, None, V, 200),
    ("get", CHAT, None, V, 200),
    ("put", CHANNEL, {"document": {"allow": ["group:web"]}}, A, 200),
    ("put", CHAT, {"document": {"allow": ["datetime"]}}, A, 200),
    ("delete", CHANNEL, None, A, 204),
    ("delete", CHAT, None, A, 204),
    ("get", "/api/v1/policy/versions/", None, V, 200),
    ("get", "/api/v1/policy/versions/?scope=agent&agent={agent}", None, V, 200),
    ("get", VERSION, None, V, 200),
    ("get", VERSION + "rollback", None, V, 200),
    ("post", VERSION + "rollback", None, A, 200),
    ("get", "/api/v1/agents/{agent}/tools/explain", None, V, 200),
    ("get", "/api/v1/agents/{agent}/tools/explain?provider=openai&channel=telegram", None, V, 200),
    ("post", "/api/v1/policy/preview", PREVIEW, M, 200),
    ("get", "/api/v1/policy/export", None, V, 200),
    ("put", "/api/v1/policy/export", BUNDLE, A, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test): policies of
    the tenant, of the agent ``target``, of a channel and one of its chats, and an older tenant version
    that differs from the current one (a rollback changes something)."""
    system = Actor.system(tenant)
    agent = Agent.objects.for_tenant(tenant).get(key="target")
    first = policy.policy_save(system, policy.target(Scope.TENANT), {"deny": ["cron"]})
    policy.policy_save(system, policy.target(Scope.TENANT), {"deny": ["cron", "tts"]})
    policy.policy_save(system, policy.target(Scope.AGENT, agent=agent), {"deny": ["exec"]})
    policy.policy_save(system, policy.target(Scope.CHANNEL, channel="telegram"), {"allow": ["group:web"]})
    policy.policy_save(
        system, policy.target(Scope.CHANNEL, channel="telegram", chat_id="42"), {"allow": ["web_search"]}
    )
    assert isinstance(first.version, PolicyVersion)
    return {"policy_version": str(first.version.pk), "policy_channel": "telegram", "policy_chat": "42"}
