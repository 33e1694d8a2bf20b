"""django-q2 jobs of MCP servers. Jobs take ids, re-read through the tenant, and are idempotent.

Discovery that fails is tried again with exponential backoff (``TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS``,
doubling up to ``TOOLGATE_MCP_DISCOVERY_RETRY_MAX_SECONDS``) until it succeeds or the server is
disabled, deleted or changed: each retry is a one-off django-q2 ``Schedule`` named for the server (at
most one per server), whose arguments carry the registration's generation and the number of failures it
follows, so a retry that a newer registration, an edit or a successful refresh made stale does nothing.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from apps.mcp_grants import client
from apps.mcp_grants.models import MCPServer
from apps.tenants.models import Tenant

logger = logging.getLogger(__name__)

FUNC = "apps.mcp_grants.tasks.discover"


def retry_delay(failures: int) -> float:
    """Seconds before the retry that follows ``failures`` failed attempts (1-based)."""
    first = float(getattr(settings, "TOOLGATE_MCP_DISCOVERY_RETRY_SECONDS", 5))
    most = float(getattr(settings, "TOOLGATE_MCP_DISCOVERY_RETRY_MAX_SECONDS", 300))
    return min(first * 2.0 ** min(max(failures - 1, 0), 30), most)


def retry_schedule_name(server_id: object) -> str:
    return f"mcp-discovery:{server_id}"


def discover(
    tenant_id: str, server_id: str, generation: int | None = None, failures: int | None = None
) -> bool:
    """Connect to the server once (a fresh session, closed again: a worker keeps no connections), store
    its tools and record its status. False when the server is gone, disabled or unreachable; when
    unreachable, the next attempt is scheduled. A retry (``generation`` and ``failures`` given) does
    nothing when the server was changed, refreshed or tried again since it was scheduled."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return False
    server = MCPServer.objects.for_tenant(tenant).filter(pk=server_id, enabled=True).first()
    if server is None:
        return False
    if generation is not None and (
        server.discovery_generation != generation or server.discovery_failures != failures
    ):
        return False
    found = client.probe(server, store=True)
    if found.ok:
        discovery_succeeded(server)
    else:
        discovery_failed(server, server.discovery_generation, found.error)
    return found.ok


@transaction.atomic
def discovery_failed(server: MCPServer, generation: int, error: str) -> None:
    """Count a failed discovery of ``server`` (of registration ``generation``) and schedule the next."""
    locked = MCPServer.objects.select_for_update().filter(pk=server.pk, tenant_id=server.tenant_id).first()
    if locked is None or not locked.enabled or locked.discovery_generation != generation:
        return
    locked.discovery_failures += 1
    locked.discovery_retry_at = timezone.now() + timedelta(seconds=retry_delay(locked.discovery_failures))
    locked.save(update_fields=["discovery_failures", "discovery_retry_at"])
    Schedule.objects.filter(name=retry_schedule_name(locked.pk)).delete()
    Schedule.objects.create(
        name=retry_schedule_name(locked.pk),
        func=FUNC,
        args=repr((str(locked.tenant_id), str(locked.pk), generation, locked.discovery_failures)),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=locked.discovery_retry_at,
    )
    health = {
        **(locked.last_health or {}),
        "discovery_failures": locked.discovery_failures,
        "next_try_at": locked.discovery_retry_at.isoformat(),
    }
    client.record_status(client.endpoint_for(locked), MCPServer.Status.ERROR, health, True)
    logger.info(
        "MCP server %s: discovery failed (%s times: %s); next try at %s",
        locked.name,
        locked.discovery_failures,
        error[:200],
        locked.discovery_retry_at.isoformat(),
    )


def discovery_succeeded(server: MCPServer) -> None:
    """The server's tools were discovered: its pending retries are dropped."""
    MCPServer.objects.filter(pk=server.pk, tenant_id=server.tenant_id).exclude(
        discovery_failures=0, discovery_retry_at=None
    ).update(discovery_failures=0, discovery_retry_at=None)
    Schedule.objects.filter(name=retry_schedule_name(server.pk)).delete()


def restart_discovery(server: MCPServer) -> None:
    """A registration, or a change of how ``server`` is reached: pending retries are superseded (a new
    generation) and, when the server is enabled, its tools are discovered once the transaction commits."""
    MCPServer.objects.filter(pk=server.pk, tenant_id=server.tenant_id).update(
        discovery_generation=server.discovery_generation + 1, discovery_failures=0, discovery_retry_at=None
    )
    server.discovery_generation += 1
    server.discovery_failures, server.discovery_retry_at = 0, None
    Schedule.objects.filter(name=retry_schedule_name(server.pk)).delete()
    if server.enabled:
        schedule_discovery(server)


def cancel_retries(server_id: object) -> None:
    Schedule.objects.filter(name=retry_schedule_name(server_id)).delete()


def schedule_discovery(server: MCPServer) -> None:
    """Discover ``server``'s tools in the background once the current transaction commits."""
    from django_q.tasks import async_task

    tenant_id, server_id = str(server.tenant_id), str(server.pk)
    transaction.on_commit(lambda: async_task(FUNC, tenant_id, server_id, group="mcp"))
