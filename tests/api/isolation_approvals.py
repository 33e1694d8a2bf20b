"""Tenant-isolation cases for the routes of pending approvals, decisions and allow-always rules (merged into
``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.accounts import services
from apps.policy import approval_services
from apps.policy.approval_models import ApprovalRule
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.isolation_support import Case


def _agent(tenant: Tenant) -> Agent:
    existing = Agent.objects.for_tenant(tenant).filter(key="a-approvals-agent").first()
    if existing is not None:
        return existing
    return services.agent_create(actor=Actor.system(tenant), key="a-approvals-agent", name="A's agent")


def _pending(tenant: Tenant, agent: Agent, command: str = "touch a-secret-file"):  # type: ignore[no-untyped-def]
    return approval_services.approval_request(
        actor=Actor.system(tenant),
        agent=agent,
        call_id="a" * 32,
        tool="exec",
        command=command,
        cwd="",
        shapes=[
            {"command": command, "binary_path": "/usr/bin/touch", "shape": "/usr/bin/touch *", "safe": False}
        ],
        reason="approval required",
        package_install=False,
        origin="user",
        session_key="a-session",
        user_id="a-user",
        wait=True,
    )


def make_approval(tenant: Tenant) -> dict[str, str]:
    """A pending approval of tenant A."""
    return {"pk": str(_pending(tenant, _agent(tenant)).pk)}


def make_rule(tenant: Tenant) -> dict[str, str]:
    """An active allow-always rule of tenant A (from an allow-always decision)."""
    approval = _pending(tenant, _agent(tenant))
    approval_services.approval_decide(actor=Actor.system(tenant), approval=approval, decision="allow-always")
    return {"pk": str(ApprovalRule.objects.for_tenant(tenant).get().pk)}


CASES: dict[str, Case] = {
    "approval-list": Case(make=make_approval, collection=True),
    "approval-detail": Case(make=make_approval),
    "approval-decide": Case(
        make=make_approval,
        writes=[
            ("post", {"decision": "allow-always", "reason": "B says so"}),
            ("post", {"decision": "deny"}),
        ],
    ),
    "approval-rule-list": Case(make=make_rule, collection=True),
    "approval-rule-detail": Case(make=make_rule, writes=[("delete", None)]),
}
