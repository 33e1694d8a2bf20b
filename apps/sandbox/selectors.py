"""Reads of the sandbox's container rows and settings, always within one tenant (one container
for a request: ``apps.sandbox.access``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.sandbox.models import SandboxContainer
from apps.tenants.scoping import TenantQuerySet
from apps.toolkit.runtime_settings import effective
from apps.toolkit.sandbox_config import SandboxConfig

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

# The most containers a list shows (the API pages up to this; the dashboard shows the first this many).
MAX_CONTAINERS = 200


def container_list(*, tenant: Tenant) -> TenantQuerySet[SandboxContainer]:
    """The tenant's containers, the most recently used first."""
    return (
        SandboxContainer.objects.for_tenant(tenant)
        .select_related("agent", "tenant")
        .order_by("-last_used_at", "-created_at", "id")
    )


def tenant_config(tenant: Tenant) -> SandboxConfig:
    """The tenant's sandbox configuration in effect (defaults < the tenant's keys), before any agent's."""
    return SandboxConfig.of(effective(tenant.settings, {})["sandbox"])


def agent_config(tenant: Tenant, agent: Agent) -> SandboxConfig:
    """One agent's sandbox configuration in effect: its own keys over the tenant's."""
    return SandboxConfig.of(effective(tenant.settings, agent.settings)["sandbox"])


def stored(settings: Any) -> dict[str, Any]:
    """The ``sandbox`` object stored in a tenant's or agent's settings (empty when there is none)."""
    value = settings.get("sandbox") if isinstance(settings, dict) else None
    return dict(value) if isinstance(value, dict) else {}
