"""Custom tools: shell commands a tenant's admins define at run time, called by agents like any other tool
(SPEC Part A "Custom tools and credentialed CLIs", B §4).

A tool is global (``agent`` null: every agent of the tenant) or belongs to one agent; an agent's own tool
overrides a global one of the same name. ``env`` is encrypted at rest (django-encrypted-model-fields
with ``FIELD_ENCRYPTION_KEY``) as JSON text read through the ``env`` property; it is never returned by
the API nor written to the audit log (names only).
"""

from __future__ import annotations

import json

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped

NAME_RE = r"\A[a-z][a-z0-9_]{0,63}\Z"
name_validator = RegexValidator(
    NAME_RE, "1 to 64 characters: a lower-case letter, then lower-case letters, digits or '_'."
)
DEFAULT_TIMEOUT_SECONDS = 60
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 600


class CustomTool(TenantScoped):
    name = models.CharField(max_length=64, validators=[name_validator])
    description = models.TextField(blank=True, default="")
    parameters = models.JSONField(default=dict, blank=True)  # a JSON Schema of type object
    command = models.TextField()  # the template: {{.key}} placeholders, rendered shell-quoted
    working_dir = models.CharField(max_length=1024, blank=True, default="")  # relative to the workspace
    timeout_seconds = models.PositiveIntegerField(
        default=DEFAULT_TIMEOUT_SECONDS,
        validators=[MinValueValidator(MIN_TIMEOUT_SECONDS), MaxValueValidator(MAX_TIMEOUT_SECONDS)],
    )
    env_encrypted = EncryptedTextField(blank=True, default="")
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=255)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"], condition=Q(agent__isnull=True), name="custom_tool_unique_global"
            ),
            models.UniqueConstraint(
                fields=["tenant", "agent", "name"],
                condition=Q(agent__isnull=False),
                name="custom_tool_unique_per_agent",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "agent"], name="custom_tool_agent")]

    def __str__(self) -> str:
        return self.name

    @property
    def env(self) -> dict[str, str]:
        if not self.env_encrypted:
            return {}
        value = json.loads(self.env_encrypted)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        self.env_encrypted = json.dumps(value, sort_keys=True) if value else ""
