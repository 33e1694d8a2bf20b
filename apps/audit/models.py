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
