"""Every write of the sandbox's administration: stopping a container, and the tenant's and one agent's
``sandbox`` settings.

Each is atomic, writes its audit row inside its transaction and publishes on the tenant's ``sandbox``
topic after commit. Settings go through the tenants' services (``tenant_update``, ``agent_update``),
which validate them (``apps.toolkit.sandbox_config.validate``), audit the change and raise the tenant's
configuration version, so the next call in every process runs with them.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.accounts import services as tenant_services
from apps.audit.services import record
from apps.realtime import events
from apps.sandbox import manager, selectors
from apps.sandbox.errors import SandboxErrorCode
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent, Tenant

TOPIC = manager.TOPIC


@transaction.atomic
def container_stop(*, actor: Actor, row: SandboxContainer) -> None:
    """Stop and remove one of the tenant's containers and its row. When the engine fails to, nothing
    changes (the row stays, nothing is audited) and a 503 ``ServiceError`` says so; a container the
    engine no longer has is simply forgotten."""
    locked = (
        SandboxContainer.objects.for_tenant(actor.tenant)
        .select_for_update(of=("self",))
        .filter(pk=row.pk)
        .select_related("agent", "tenant")
        .first()
    )
    if locked is None:  # stopped a moment ago by someone else
        return
    data = manager.describe(locked)
    record(
        actor=actor,
        verb="sandbox.container.stopped",
        target_type="sandbox_container",
        target_id=str(locked.pk),
        data=data,
    )
    if not manager.remove(locked, reason="stopped"):
        raise ServiceError(
            SandboxErrorCode.ENGINE_UNAVAILABLE,
            f"The Docker engine could not stop the container {locked.name}; it is kept. "
            "Try again once the engine answers.",
            status=503,
        )


def _publish_settings(actor: Actor, *, agent: Agent | None, values: dict[str, Any]) -> None:
    data = {"agent": agent.key if agent is not None else None, "sandbox": values}
    events.publish(tenant=actor.tenant, topic=TOPIC, type="sandbox.settings.updated", data=data)


@transaction.atomic
def sandbox_settings_update(*, actor: Actor, values: dict[str, Any]) -> Tenant:
    """Replace the tenant's ``sandbox`` settings with ``values`` (the tenant's other settings are kept)."""
    before = selectors.stored(
        Tenant.objects.filter(pk=actor.tenant.pk).values_list("settings", flat=True).first()
    )
    tenant = tenant_services.tenant_update(actor=actor, changes={"settings": {"sandbox": dict(values)}})
    after = selectors.stored(tenant.settings)
    if after != before:
        _publish_settings(actor, agent=None, values=after)
    return tenant


@transaction.atomic
def agent_sandbox_update(*, actor: Actor, agent: Agent, values: dict[str, Any]) -> Agent:
    """Replace one agent's ``sandbox`` overrides with ``values`` (empty: the agent inherits every key
    from the tenant); the agent's other settings are kept."""
    before = selectors.stored(agent.settings)
    settings = {k: v for k, v in (agent.settings or {}).items() if k != "sandbox"}
    if values:
        settings["sandbox"] = dict(values)
    agent = tenant_services.agent_update(actor=actor, agent=agent, changes={"settings": settings})
    after = selectors.stored(agent.settings)
    if after != before:
        _publish_settings(actor, agent=agent, values=after)
    return agent
