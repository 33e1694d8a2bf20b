"""Tenant-isolation cases for the routes of policy documents, versions, explain, import/export (merged into
``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.policy import services as policy
from apps.policy.models import PolicyVersion, Scope
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.isolation_support import Case, _agent

NOTE = "a-private-note"
CHANNEL = "a-secret-channel"


def _policies(tenant: Tenant) -> dict[str, str]:
    """A's agent and policies of every scope; returns names that must never reach tenant B."""
    key = _agent(tenant)["key"]
    system = Actor.system(tenant)
    agent = Agent.objects.for_tenant(tenant).get(key=key)
    policy.policy_save(system, policy.target(Scope.TENANT), {"deny": ["publish_skill"]}, note=NOTE)
    policy.policy_save(system, policy.target(Scope.AGENT, agent=agent), {"deny": ["tts"]}, note=NOTE)
    policy.policy_save(system, policy.target(Scope.CHANNEL, channel=CHANNEL), {"allow": ["datetime"]})
    return {"key": key, "channel": CHANNEL, "note": NOTE, "tool": "publish_skill"}


def _agent_policy(tenant: Tenant) -> dict[str, str]:
    return {"key": _policies(tenant)["key"]}


def _channel_policy(tenant: Tenant) -> dict[str, str]:
    return {"channel": _policies(tenant)["channel"]}


def _version(tenant: Tenant) -> dict[str, str]:
    _policies(tenant)
    version = PolicyVersion.objects.for_tenant(tenant).filter(scope=Scope.TENANT).get()
    # A later change, so that a rollback to this version would change something.
    policy.policy_save(Actor.system(tenant), policy.target(Scope.TENANT), {"deny": ["cron"]})
    return {"pk": str(version.pk)}


CASES: dict[str, Case] = {
    "policy-tenant": Case(make=_policies, collection=True),
    "policy-agent": Case(
        make=_agent_policy,
        writes=[("put", {"document": {"alsoAllow": ["publish_skill"]}}), ("delete", None)],
    ),
    "policy-channel-list": Case(make=_policies, collection=True),
    # B may keep a channel group of the same name (its own); B cannot read or delete A's.
    "policy-channel": Case(make=_channel_policy, writes=[("delete", None)]),
    "policy-version-list": Case(make=_policies, collection=True),
    "policy-version-detail": Case(make=_version),
    "policy-version-rollback": Case(make=_version, writes=[("post", None)]),
    "agent-tools-explain": Case(make=_agent_policy),
    "policy-preview": Case(
        make=_agent_policy,
        post_only=True,
        body=lambda kwargs: {"scope": "agent", "agent": kwargs["key"], "document": {"alsoAllow": ["tts"]}},
    ),
    "policy-export": Case(make=_policies, collection=True),
}
