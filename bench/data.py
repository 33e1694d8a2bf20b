"""The bench's data set: a tenant with an admin API key, 50 agents and 1000 audit events, plus a
second tenant with 1000 events of its own so that tenant scoping has something to filter out."""

from __future__ import annotations

from dataclasses import dataclass

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role

AGENTS = 50
AUDIT_EVENTS = 1000


@dataclass(frozen=True)
class BenchData:
    tenant: Tenant
    api_key: str


def _fill_audit_log(tenant: Tenant, *, total: int) -> None:
    """Top the tenant's audit log up to ``total`` events.

    Written with one ``bulk_create`` instead of ``audit.services.record``: a thousand service calls
    would also publish a thousand realtime events and take most of the time budget, and the read path
    being measured does not care how the rows were written. The model forbids updates and deletes,
    not inserts, so this is the only shortcut taken.
    """
    missing = total - AuditEvent.objects.for_tenant(tenant).count()
    events = [
        AuditEvent(
            tenant=tenant,
            actor_kind=AuditEvent.ActorKind.SYSTEM,
            actor_id="system",
            actor_label="bench",
            verb=("agent.updated", "api_key.created", "membership.created")[i % 3],
            target_type="agent",
            target_id=str(i),
            data={"n": i, "changes": {"name": f"agent {i}"}},
            request_id=f"bench-{i}",
        )
        for i in range(missing)
    ]
    AuditEvent.objects.bulk_create(events, batch_size=500)


def seed() -> BenchData:
    """Create the data set through the services, as the API would, except for the bulk audit rows."""
    tenant = services.tenant_create(slug="bench", name="Bench")
    # The benches drive this tenant far past the default rate quotas: limits it never reaches, so the
    # quota checks are still paid (a statement per 50 calls) but never refuse.
    Tenant.objects.filter(pk=tenant.pk).update(
        quotas={"tool_calls_per_minute": 10**9, "api_requests_per_minute": 10**9}
    )
    tenant.refresh_from_db()
    system = Actor.system(tenant)
    _, raw_key = services.api_key_create(actor=system, name="bench", role=Role.ADMIN)
    for i in range(AGENTS):
        services.agent_create(
            actor=system,
            key=f"agent-{i:02d}",
            name=f"Agent {i}",
            description="A benchmark agent with a description of typical length.",
            provider="openai",
            model="gpt-4o-mini",
            settings={"temperature": 0.2, "sandbox": {"mode": "off"}},
        )
    _fill_audit_log(tenant, total=AUDIT_EVENTS)

    other = services.tenant_create(slug="bench-other", name="Bench (other tenant)")
    _fill_audit_log(other, total=AUDIT_EVENTS)
    return BenchData(tenant=tenant, api_key=raw_key)
