"""The append-only audit log."""

from __future__ import annotations

from typing import Any, NoReturn

from django.db import models

from apps.tenants.scoping import TenantScoped


class AuditEvent(TenantScoped):
    """One recorded change. Rows are never updated or deleted: the model refuses it and a database
    trigger refuses it too (migration 0002), except for an explicit retention session."""

    class ActorKind(models.TextChoices):
        USER = "user", "User"
        API_KEY = "api_key", "API key"
        SYSTEM = "system", "System"

    actor_kind = models.CharField(max_length=20, choices=ActorKind.choices)
    actor_id = models.CharField(max_length=64)
    actor_label = models.CharField(max_length=300, blank=True)
    verb = models.CharField(max_length=100)
    target_type = models.CharField(max_length=100)
    target_id = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="audit_tenant_time"),
            models.Index(fields=["tenant", "verb", "-created_at"], name="audit_tenant_verb"),
            models.Index(fields=["tenant", "target_type", "target_id"], name="audit_tenant_target"),
            models.Index(fields=["tenant", "actor_kind", "actor_id"], name="audit_tenant_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.verb} {self.target_type}:{self.target_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise RuntimeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError("audit events are append-only")


OUTPUT_STORE_CHARS = 16 * 1024  # of each stored part of a call's result


class ToolCall(TenantScoped):
    """One tool call that went through the pipeline, whatever its outcome. Arguments are stored scrubbed."""

    class Decision(models.TextChoices):
        ALLOWED = "allowed", "Allowed"
        UNKNOWN = "unknown", "Unknown tool"
        DENIED = "denied", "Denied by policy"
        ORIGIN_DENIED = "origin_denied", "Denied for the origin"
        APPROVAL_DENIED = "approval_denied", "Approval denied"
        SAFEGUARD = "safeguard", "Blocked by the safeguard"
        RATE_LIMITED = "rate_limited", "Rate limited"
        INVALID = "invalid", "Invalid arguments"
        UNAVAILABLE = "unavailable", "Unavailable here"

    class Status(models.TextChoices):
        OK = "ok", "OK"
        ERROR = "error", "Error"

    agent = models.ForeignKey("tenants.Agent", null=True, on_delete=models.SET_NULL, related_name="+")
    agent_key = models.CharField(max_length=64)
    tool = models.CharField(max_length=200)  # the name as called
    resolved_tool = models.CharField(max_length=200, blank=True)  # the catalog tool it ran as
    args = models.JSONField(default=dict, blank=True)
    decision = models.CharField(max_length=20, choices=Decision.choices)
    status = models.CharField(max_length=10, choices=Status.choices)
    error = models.TextField(blank=True, max_length=2000)
    duration_ms = models.FloatField(default=0)
    for_llm_bytes = models.PositiveIntegerField(default=0)
    for_user_bytes = models.PositiveIntegerField(default=0)
    # The result as the caller got it (scrubbed), each part bounded at OUTPUT_STORE_CHARS characters;
    # ``output_for_user`` only where it differs from ``output``. Listings and exports leave them out.
    output = models.TextField(blank=True, default="")
    output_for_user = models.TextField(blank=True, default="")
    output_truncated = models.BooleanField(default=False)
    # The run whose model made the call (Toolgate's runner, or an external runner that named it).
    run_id = models.UUIDField(null=True, blank=True)
    session_key = models.CharField(max_length=200, blank=True)
    user_id = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=100, blank=True)
    chat_id = models.CharField(max_length=200, blank=True)
    origin = models.CharField(max_length=20, blank=True)
    provider = models.CharField(max_length=100, blank=True)
    subagent_depth = models.PositiveSmallIntegerField(default=0)
    actor_kind = models.CharField(max_length=20)
    actor_id = models.CharField(max_length=64)
    request_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="toolcall_tenant_time"),
            models.Index(fields=["tenant", "tool", "-created_at"], name="toolcall_tenant_tool"),
            models.Index(fields=["tenant", "agent_key", "-created_at"], name="toolcall_tenant_agent"),
            models.Index(fields=["tenant", "session_key", "-created_at"], name="toolcall_tenant_session"),
            models.Index(
                fields=["tenant", "run_id", "-created_at"],
                name="toolcall_tenant_run",
                condition=models.Q(run_id__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.decision}/{self.status})"
