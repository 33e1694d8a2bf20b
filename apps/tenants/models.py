"""Tenants, memberships, agents and API keys."""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.roles import Role
from apps.tenants.scoping import TenantScoped
from apps.tenants.validators import validate_settings_object

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    "Use 1-50 lowercase letters, digits and hyphens, starting and ending with a letter or digit.",
)
agent_key_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,63}$",
    "Use 1-64 lowercase letters, digits, '_' and '-', starting with a letter or digit.",
)


class Tenant(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        SUSPENDED = "suspended", "Suspended"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    settings = models.JSONField(default=dict, blank=True, validators=[validate_settings_object])
    # Raised, in the same transaction, by every change to what decides an agent's tools (agents, and the
    # rows later layers add: policies, grants, custom tools). A request reads it with its tenant
    # (authentication does), so a cache keyed by it serves exactly what the database held then, in
    # every process, with no extra query and nothing to invalidate (``config_changed``).
    config_version = models.BigIntegerField(default=0, editable=False)
    # Set by ``suspend_tenant`` (platform staff), cleared by ``resume_tenant``; shown to the tenant's
    # members and keys in the refusal.
    suspended_at = models.DateTimeField(null=True, blank=True, editable=False)
    suspended_reason = models.CharField(max_length=500, blank=True, editable=False)
    # Overrides of the installation's quota defaults, by name (``apps.tenants.quotas``); set by staff.
    quotas = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class Membership(TenantScoped):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_user")]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant_id}:{self.role}"


class Agent(TenantScoped):
    class Type(models.TextChoices):
        OPEN = "open", "Open"
        PREDEFINED = "predefined", "Predefined"

    key = models.CharField(max_length=64, validators=[agent_key_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, max_length=2000)
    type = models.CharField(max_length=20, choices=Type.choices, default=Type.OPEN)
    provider = models.CharField(max_length=100, blank=True)
    model = models.CharField(max_length=200, blank=True)
    settings = models.JSONField(default=dict, blank=True, validators=[validate_settings_object])

    class Meta:
        ordering = ["key"]
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="agent_unique_key")]

    def __str__(self) -> str:
        return self.key


class ApiKey(TenantScoped):
    """A tenant-bound API key. Only a SHA-256 digest of the secret is stored; the prefix stays visible.

    ``origin`` is who the key's tool calls come from, for the policy's ``originDeny`` and for exec
    approvals: ``user`` unless an owner made the key for a channel integration (``comm``), an
    application (``app``) or a skill (``skill``). A request never chooses it. ``system`` is not among
    the choices on purpose: it belongs to Toolgate's own jobs (cron, heartbeats, recovery, re-runs of
    approved calls), whose exec commands are approved without asking, and no key may ever carry it."""

    class Origin(models.TextChoices):
        USER = "user", "User"
        COMM = "comm", "Channel integration"
        APP = "app", "Application"
        SKILL = "skill", "Skill"

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    origin = models.CharField(max_length=20, choices=Origin.choices, default=Origin.USER)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expiry_recorded_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                "tenant",
                Lower("name"),
                condition=models.Q(revoked_at__isnull=True),
                name="apikey_unique_active_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.is_expired:
            return "expired"
        return "active"


class SettingSecret(TenantScoped):
    """One secret-bearing runtime setting (``apps.tenants.setting_secrets.SECRET_PATHS``) of a tenant, or of
    one of its agents: the value is encrypted at rest and never stays in the settings JSON. Write-only:
    reads show whether it is set, never the value; the pipeline gives it to the tool that needs it and
    registers it with the call's scrubber."""

    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="setting_secrets"
    )
    path = models.CharField(max_length=200)  # dotted, e.g. "tools.web_search.api_key"
    value = EncryptedTextField()

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "path"],
                condition=models.Q(agent__isnull=True),
                name="settingsecret_unique_tenant_path",
            ),
            models.UniqueConstraint(
                fields=["tenant", "agent", "path"], name="settingsecret_unique_agent_path"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path} ({'agent ' + str(self.agent_id) if self.agent_id else 'tenant'})"


class PlatformEvent(models.Model):
    """One action of the people who run the installation on a tenant as a whole (suspend, resume,
    delete, quota changes). Not a tenant's row: it names the tenant by id and slug, so it outlives a
    deleted tenant. Append-only like the tenants' audit log."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=300)  # "command:<os user>" or "staff:<username>"
    verb = models.CharField(max_length=100)
    tenant_id_value = models.UUIDField(null=True, blank=True)
    tenant_slug = models.CharField(max_length=50, blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant_slug", "-created_at"], name="platform_event_tenant")]

    def __str__(self) -> str:
        return f"{self.verb} {self.tenant_slug}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise RuntimeError("platform events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError("platform events are append-only")
