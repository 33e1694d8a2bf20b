"""A tenant's lifecycle as the platform's operators steer it: suspend and resume.

Suspension keeps every row and stops everything the tenant has running or could start:

- its API keys and its members' logins answer 403 ``tenant_suspended`` with the reason, on the REST API,
  the MCP endpoint and the dashboard; its websockets are closed (and new ones refused);
- its queued, running and waiting runs are cancelled (a waiting run's approval is withdrawn);
- its sandbox containers are removed;
- its MCP server connections are dropped and their processes stopped, by every process at its next health
  check (``TOOLGATE_MCP_HEALTH_SECONDS``), and in this process at once;
- its scheduled jobs are skipped (each firing recorded as skipped) and the team ticker passes it by.

Each action is written to the platform's own log (``PlatformEvent``) and to the tenant's audit log.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import record
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants.models import MCPServer
from apps.realtime.events import disconnect
from apps.runs.models import ACTIVE, Run
from apps.runs.services import run_cancel
from apps.sandbox import manager as sandbox
from apps.sandbox.models import SandboxContainer
from apps.tenants.actors import Actor
from apps.tenants.authentication import suspended_message
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import PlatformEvent, Tenant
from apps.tenants.services import config_changed

logger = logging.getLogger(__name__)
MAX_REASON = 500


@dataclass
class Suspension:
    runs_cancelled: int = 0
    containers_removed: int = 0
    containers_left: int = 0
    mcp_connections_closed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def platform_event(*, by: str, verb: str, tenant: Tenant, data: dict[str, Any]) -> PlatformEvent:
    """One row of the platform's log, in the caller's transaction."""
    event = PlatformEvent(
        actor=by[:300], verb=verb, tenant_id_value=tenant.pk, tenant_slug=tenant.slug, data=data
    )
    event.full_clean()
    event.save()
    return event


def tenant_suspend(*, tenant: Tenant, by: str, reason: str = "") -> Suspension:
    """Suspend ``tenant`` (see the module's docstring); 409 when it already is."""
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise ServiceError(ErrorCode.INVALID, f"reason: at most {MAX_REASON} characters.")
    done = Suspension()
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if locked.status == Tenant.Status.SUSPENDED:
            raise Conflict(ErrorCode.CONFLICT, f"Tenant '{locked.slug}' is already suspended.")
        locked.status = Tenant.Status.SUSPENDED
        locked.suspended_at = timezone.now()
        locked.suspended_reason = reason
        locked.save(update_fields=["status", "suspended_at", "suspended_reason", "updated_at"])
        config_changed(locked)
        system = Actor.system(locked)
        record(
            actor=system,
            verb="tenant.suspended",
            target_type="tenant",
            target_id=str(locked.pk),
            data={"reason": reason, "by": by},
        )
        platform_event(by=by, verb="tenant.suspended", tenant=locked, data={"reason": reason})
        disconnect(
            kind="tenant", ident=str(locked.pk), reason=suspended_message(locked), code="tenant_suspended"
        )
        for run in Run.objects.for_tenant(locked).filter(status__in=ACTIVE).order_by("created_at"):
            try:
                run_cancel(actor=system, run=run)
            except ServiceError:
                continue  # it finished meanwhile
            done.runs_cancelled += 1
    # The engine and the MCP processes are outside the database: after the commit, so a refusal there
    # never undoes the suspension (what is left is reported, and retried by sandbox pruning).
    for row in SandboxContainer.objects.for_tenant(locked).order_by("created_at"):
        if sandbox.remove(row, reason="tenant suspended"):
            done.containers_removed += 1
        else:
            done.containers_left += 1
    done.mcp_connections_closed = _close_mcp_connections(locked)
    logger.info("tenant %s suspended by %s: %s", locked.slug, by, done.as_dict())
    return done


def tenant_resume(*, tenant: Tenant, by: str) -> Tenant:
    """Undo a suspension: keys, logins, websockets, schedules and MCP servers work again (cancelled runs
    stay cancelled); 409 when the tenant is not suspended."""
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if locked.status != Tenant.Status.SUSPENDED:
            raise Conflict(ErrorCode.CONFLICT, f"Tenant '{locked.slug}' is not suspended.")
        suspended_for = (
            (timezone.now() - locked.suspended_at).total_seconds() if locked.suspended_at else None
        )
        locked.status = Tenant.Status.ACTIVE
        locked.suspended_at = None
        locked.suspended_reason = ""
        locked.save(update_fields=["status", "suspended_at", "suspended_reason", "updated_at"])
        config_changed(locked)
        data = {"by": by, "suspended_seconds": round(suspended_for) if suspended_for is not None else None}
        record(
            actor=Actor.system(locked),
            verb="tenant.resumed",
            target_type="tenant",
            target_id=str(locked.pk),
            data=data,
        )
        platform_event(by=by, verb="tenant.resumed", tenant=locked, data={})
    return locked


def _close_mcp_connections(tenant: Tenant) -> int:
    server_ids = {str(pk) for pk in MCPServer.objects.for_tenant(tenant).values_list("pk", flat=True)}
    mgr = mcp_client.manager()
    held = [key for key in mgr.connection_states() if key[0] in server_ids]
    for server_id in {key[0] for key in held}:
        try:
            mgr.run(mgr.close(server_id), 10)
        except Exception:  # the health check drops it anyway
            logger.warning("could not close MCP server %s of suspended tenant %s now", server_id, tenant.slug)
    return len(held)
