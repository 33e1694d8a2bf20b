"""Tenant-isolation cases for the routes of the sandbox (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from django.utils import timezone

from apps.accounts import services
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case

# A memory limit no other tenant has: B's answers must not carry it.
A_MEMORY_MB = 12345


def make_sandbox_container(tenant: Tenant, prefix: str = "secret") -> SandboxContainer:
    """An agent of ``tenant`` with a container row (a made-up container: the engine answers NotFound
    for it, so stopping it succeeds), and the tenant's own sandbox settings."""
    system = Actor.system(tenant)
    services.tenant_update(actor=system, changes={"settings": {"sandbox": {"memory_mb": A_MEMORY_MB}}})
    agent = services.agent_create(actor=system, key=f"{prefix}-sandboxed", name="Sandboxed")
    return SandboxContainer.objects.create(
        tenant=tenant,
        key=f"{prefix}-key",
        scope=SandboxContainer.Scope.SESSION,
        agent=agent,
        session_key=f"{prefix}-session-of-a",
        name=f"toolgate-sbx-{prefix}-of-a",
        container_id=f"{prefix}-container-of-a",
        image="toolgate-sandbox:bookworm-slim",
        fingerprint="0" * 16,
        workspace_access="rw",
        limits={"memory_mb": A_MEMORY_MB},
        last_used_at=timezone.now(),
    )


def _status(tenant: Tenant) -> dict[str, str]:
    row = make_sandbox_container(tenant)
    return {"memory": str(A_MEMORY_MB), "name": row.name}


def _container(tenant: Tenant) -> dict[str, str]:
    return {"pk": str(make_sandbox_container(tenant).pk)}


CASES: dict[str, Case] = {
    # B's own settings and engine: nothing of A's in the answer.
    "sandbox-status": Case(make=_status, collection=True),
    "sandbox-container-list": Case(make=_container, collection=True),
    "sandbox-container-detail": Case(make=_container, writes=[("delete", None)]),
}
