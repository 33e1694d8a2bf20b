"""What the tenant-isolation test needs to reach a route for an object of tenant A.

Feature modules (``isolation_policy.py``, ``isolation_approvals.py``) define their own ``CASES`` with
these helpers; ``test_tenant_isolation.py`` merges them, and fails for any API route without a case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories


@dataclass
class Case:
    """How to reach one route for an object of tenant A, and which writes to try on it."""

    make: Callable[[Tenant], dict[str, str]]  # creates A's object, returns URL kwargs
    collection: bool = False  # a list: B gets 200 without A's rows
    writes: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    own_tenant_only: bool = False  # answers about the caller itself (e.g. /me/)
    tenant_agnostic: bool = False  # the same document for every tenant (the tool catalog)
    post_only: bool = False  # POST only, naming A's agent in the body
    body: Callable[[dict[str, str]], dict[str, Any]] | None = None  # that body (default: an execute call)


def _agent(tenant: Tenant) -> dict[str, str]:
    agent = services.agent_create(actor=Actor.system(tenant), key="a-secret-agent", name="A's agent")
    return {"key": agent.key}


def _api_key(tenant: Tenant) -> dict[str, str]:
    key, _ = services.api_key_create(actor=Actor.system(tenant), name="A's key", role=Role.ADMIN)
    return {"pk": str(key.pk)}


def _membership(tenant: Tenant) -> dict[str, str]:
    membership = services.membership_create(
        actor=Actor.system(tenant), email="someone@a.test", role=Role.ADMIN, password=factories.PASSWORD
    )
    return {"pk": str(membership.pk)}


def _audit_event(tenant: Tenant) -> dict[str, str]:
    _agent(tenant)
    event = AuditEvent.objects.for_tenant(tenant).filter(verb="agent.created").get()
    return {"pk": str(event.pk)}


def _tool_call(tenant: Tenant) -> dict[str, str]:
    from apps.runtime import pipeline
    from apps.toolkit import gateway

    agent_key = _agent(tenant)["key"]
    agent = Agent.objects.for_tenant(tenant).get(key=agent_key)
    outcome = pipeline.execute(
        actor=Actor.system(tenant),
        request=gateway.CallRequest(agent=agent, tool="datetime", args={"timezone": "UTC"}),
    )
    return {"pk": outcome.call_id}


def _nothing(tenant: Tenant) -> dict[str, str]:
    _agent(tenant)
    return {}
