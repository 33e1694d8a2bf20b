"""A tenant's lifecycle as the platform's operators steer it: suspend, resume and delete.

Suspension keeps every row and stops everything the tenant has running or could start:

- its API keys and its members' logins answer 403 ``tenant_suspended`` with the reason, on the REST API,
  the MCP endpoint and the dashboard; its websockets are closed (and new ones refused);
- its queued, running and waiting runs are cancelled (a waiting run's approval is withdrawn);
- its sandbox containers are removed;
- the programs its calls are running (jailed, or on the host where that is allowed) are killed with their
  process groups by the process that runs them, within ``STOP_CHECK_SECONDS`` (2), on any host
  (``apps.toolkit.processes.stopped_when``); the call answers that the tenant was suspended. Its jails on
  the host where the command runs (commands and stdio MCP servers alike) are killed at once;
- its MCP server connections are dropped and their processes stopped, by every process at its next health
  check (``TOOLGATE_MCP_HEALTH_SECONDS``), and in this process at once;
- its scheduled jobs are skipped (each firing recorded as skipped) and the team ticker passes it by.

Each action is written to the platform's own log (``PlatformEvent``) and to the tenant's audit log.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.core.cache import caches
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.models import Schedule
from psycopg import sql

from apps.audit.services import record
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants.models import MCPServer
from apps.mcp_grants.tasks import retry_schedule_name
from apps.realtime.events import disconnect
from apps.runs.models import ACTIVE, CronJob, Run
from apps.runs.services import run_cancel
from apps.runtime.ratelimit_models import RateLimitWindow
from apps.runtime.tenant_export import (
    Export,
    check_export_path,
    export_tenant,
    tenant_models,
    tenant_workspace,
)
from apps.sandbox import manager as sandbox
from apps.tenants import quotas
from apps.tenants.actors import Actor
from apps.tenants.authentication import suspended_message
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import PlatformEvent, Tenant
from apps.tenants.services import config_changed
from apps.toolkit import jail

logger = logging.getLogger(__name__)
MAX_REASON = 500


@dataclass
class Suspension:
    runs_cancelled: int = 0
    containers_removed: int = 0
    containers_left: int = 0
    mcp_connections_closed: int = 0
    jails_stopped: int = 0

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


def _recorded(
    *, tenant: Tenant, by: str, verb: str, data: dict[str, Any], audit_only: dict[str, Any] | None = None
) -> None:
    """An action on the tenant as a whole, in both logs: the platform's (``data``) and the tenant's own
    audit log (``data``, ``audit_only`` and who acted), in the caller's transaction."""
    record(
        actor=Actor.system(tenant),
        verb=verb,
        target_type="tenant",
        target_id=str(tenant.pk),
        data={**data, **(audit_only or {}), "by": by},
    )
    platform_event(by=by, verb=verb, tenant=tenant, data=data)


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
        _recorded(tenant=locked, by=by, verb="tenant.suspended", data={"reason": reason})
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
    done.containers_removed, done.containers_left = sandbox.remove_tenant_containers(
        locked, reason="tenant suspended"
    )
    done.mcp_connections_closed = _close_mcp_connections(locked)
    # Its commands and stdio MCP servers in jails on this host, whichever process runs them, at once.
    done.jails_stopped = jail.stop_jails_under(tenant_workspace(locked))
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
        seconds = round(suspended_for) if suspended_for is not None else None
        _recorded(
            tenant=locked, by=by, verb="tenant.resumed", data={}, audit_only={"suspended_seconds": seconds}
        )
    return locked


def _close_mcp_connections(tenant: Tenant) -> int:
    return _close_servers(
        {str(pk) for pk in MCPServer.objects.for_tenant(tenant).values_list("pk", flat=True)}
    )


def _close_servers(server_ids: set[str]) -> int:
    """Close this process's connections to these servers now (other processes drop theirs at their next
    health check); returns how many there were."""
    mgr = mcp_client.manager()
    held = [key for key in mgr.connection_states() if key[0] in server_ids]
    for server_id in {key[0] for key in held}:
        try:
            mgr.run(mgr.close(server_id), 10)
        except Exception:  # the health check drops it anyway
            logger.warning("could not close MCP server %s now", server_id)
    return len(held)


@dataclass
class Deletion:
    export: Export | None
    rows: dict[str, int]
    containers_removed: int
    containers_left: int
    schedules: int
    cache_keys: int
    workspace_removed: bool


def tenant_delete(*, tenant: Tenant, by: str, export_path: Path | None) -> Deletion:
    """Delete ``tenant`` and everything of it: rows, workspaces, containers, schedules, cache keys.

    First it is suspended (nothing new starts; its runs are cancelled, its processes stopped) and, with
    ``export_path``, exported from that quiet state; a failed export leaves it suspended and deletes
    nothing. Then every tenant-owned row goes in one transaction (the audit log's append-only guard is
    lifted for that transaction alone), then its files and its containers. Another tenant's rows, files,
    containers and keys are never touched: every statement names this tenant's id."""
    if export_path is not None:
        check_export_path(export_path)  # before anything changes
    if tenant.status != Tenant.Status.SUSPENDED:
        tenant_suspend(tenant=tenant, by=by, reason="being deleted")
    locked = Tenant.objects.get(pk=tenant.pk)
    export = export_tenant(tenant=locked, path=export_path) if export_path is not None else None
    removed, left = sandbox.remove_tenant_containers(locked, reason="tenant deleted")
    server_ids = {str(pk) for pk in MCPServer.objects.for_tenant(locked).values_list("pk", flat=True)}
    with transaction.atomic():
        schedules = _delete_schedules(locked)
        rows = _delete_rows(locked)
        cache_keys = _delete_cache_keys(locked)
        platform_event(
            by=by,
            verb="tenant.deleted",
            tenant=locked,
            data={
                "rows": sum(rows.values()),
                "export": str(export.path) if export else None,
                "export_sha256": export.files["rows.json"]["sha256"] if export else None,
            },
        )
    workspace = tenant_workspace(locked)
    jail.stop_jails_under(workspace)  # any started since the suspension, before their files go
    if workspace.exists():
        shutil.rmtree(workspace)
    _close_servers(server_ids)
    logger.info("tenant %s deleted by %s: %s rows", locked.slug, by, sum(rows.values()))
    return Deletion(
        export=export,
        rows=rows,
        containers_removed=removed,
        containers_left=left,
        schedules=schedules,
        cache_keys=cache_keys,
        workspace_removed=not workspace.exists(),
    )


def _delete_schedules(tenant: Tenant) -> int:
    ids = [pk for pk in CronJob.objects.for_tenant(tenant).values_list("q_schedule_id", flat=True) if pk]
    names = [
        retry_schedule_name(pk) for pk in MCPServer.objects.for_tenant(tenant).values_list("pk", flat=True)
    ]
    deleted, _ = Schedule.objects.filter(Q(pk__in=ids) | Q(name__in=names)).delete()
    return int(deleted)


def _delete_rows(tenant: Tenant) -> dict[str, int]:
    counts: dict[str, int] = {}
    with connection.cursor() as cursor:
        # Foreign keys between tenant tables are checked at commit (Django makes them deferrable), when
        # every referencing row is gone too; the audit log's trigger allows deletes in this transaction.
        cursor.execute("SET LOCAL toolgate.audit_retention = 'on'")
        for model in tenant_models():
            table = model._meta.db_table
            cursor.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(sql.Identifier(table)), [tenant.pk]
            )
            counts[table] = cursor.rowcount
        cursor.execute("DELETE FROM tenants_tenant WHERE id = %s", [tenant.pk])
        cursor.execute("SET LOCAL toolgate.audit_retention = 'off'")
    return counts


def _delete_cache_keys(tenant: Tenant) -> int:
    """The tenant's cache entries and rate-limit windows: every key Toolgate makes for a tenant holds its
    id between colons (``mcp-search:<id>:…``, ``<id>:<session>``)."""
    marker = f"{tenant.pk}:"
    count, _ = RateLimitWindow.objects.filter(key__startswith=marker).delete()
    cache = caches["default"]
    backend = type(cache).__name__
    if backend == "DatabaseCache":
        with connection.cursor() as cursor:
            table = sql.Identifier(cache._table)  # type: ignore[attr-defined]
            cursor.execute(sql.SQL("DELETE FROM {} WHERE cache_key LIKE %s").format(table), [f"%:{marker}%"])
            count += cursor.rowcount
    elif backend == "RedisCache":
        client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        for pattern in (f"*:{marker}*", f"toolgate:ratelimit:{marker}*"):
            for key in client.scan_iter(match=pattern, count=500):
                count += int(client.delete(key))
    return int(count)


def tenant_quota_set(*, tenant: Tenant, by: str, changes: dict[str, Any]) -> Tenant:
    """Override (or, with None / "default", reset) some of the tenant's quotas; every value is checked
    first, so a bad one changes nothing. Takes effect at once in every process (limits are read from the
    tenant's row), and is written to the platform's log and the tenant's audit log."""
    if not changes:
        raise ServiceError(ErrorCode.INVALID, "quotas: name at least one quota to change.")
    checked: dict[str, int | None] = {}
    for name, value in changes.items():
        try:
            checked[name] = quotas.validate(name, value)
        except ValueError as exc:
            raise ServiceError(ErrorCode.INVALID, str(exc), details={name: [str(exc)]}) from None
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        current = dict(locked.quotas or {})
        before = {name: current.get(name) for name in checked}
        for name, value in checked.items():
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        locked.quotas = current
        locked.save(update_fields=["quotas", "updated_at"])
        _recorded(
            tenant=locked, by=by, verb="tenant.quota_changed", data={"before": before, "after": checked}
        )
    return locked
