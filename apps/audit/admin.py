"""Admin screens of the audit log for platform staff (see ``apps.tenants.platform_admin``), and the writer
that puts every change made in the admin into the changed tenant's audit log."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from apps.audit.models import AuditEvent, ToolCall
from apps.audit.services import record
from apps.tenants import platform_admin
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.platform_admin import PlatformModelAdmin
from apps.tenants.roles import Role


def record_admin_change(
    *, tenant: Tenant, user: Any, verb: str, target_type: str, target_id: str, data: dict[str, Any]
) -> None:
    """The staff user is the actor; the row says it came through the platform admin."""
    actor = Actor(tenant=tenant, role=Role.OWNER, kind="user", user=user)
    record(
        actor=actor,
        verb=verb,
        target_type=target_type,
        target_id=target_id,
        data={**data, "via": "platform admin", "staff": True},
    )


platform_admin.set_audit_writer(record_admin_change)


@admin.register(AuditEvent)
class AuditEventAdmin(PlatformModelAdmin):
    list_display = ("created_at", "verb", "actor_label", "target_type", "target_id", "tenant")
    list_filter = ("tenant", "actor_kind")
    search_fields = ("verb", "actor_label", "target_id")


@admin.register(ToolCall)
class ToolCallAdmin(PlatformModelAdmin):
    list_display = ("created_at", "agent_key", "tool", "decision", "status", "duration_ms", "tenant")
    list_filter = ("tenant", "decision", "status")
    search_fields = ("tool", "agent_key", "session_key")
