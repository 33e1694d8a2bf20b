"""Credentialed CLIs (SPEC Part A "Custom tools and credentialed CLIs", B §5.1).

A tenant registers a binary (``gh``, ``aws``, ``kubectl`` …) with the environment that carries its
credentials. Agents that reach it (a global binary, or one granted to them) run it through ``exec``
without a shell, the credentials injected and scrubbed from the output; the agent never sees them.

* :class:`SecureCLIBinary`: one binary per name and tenant, its credentials, argument deny lists,
  timeout and tips for agents;
* :class:`SecureCLIAgentGrant`: an agent's access to a binary, each setting overridable (NULL: the
  binary's);
* :class:`SecureCLIUserCredential`: a user's own credentials, over the binary's and the grant's.

Every environment is stored as encrypted JSON text (django-encrypted-model-fields with
``FIELD_ENCRYPTION_KEY``) and read through the ``env`` property. Values are never returned by the API
and never audited: only the variable names.
"""

from __future__ import annotations

import json

from django.db import models
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped

DEFAULT_TIMEOUT_SECONDS = 30


def _load_env(raw: str) -> dict[str, str]:
    if not raw:
        return {}
    value = json.loads(raw)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class EncryptedEnv(models.Model):
    """An ``env`` mapping over encrypted JSON text."""

    env_encrypted = EncryptedTextField(blank=True, default="")

    class Meta:
        abstract = True

    @property
    def env(self) -> dict[str, str]:
        return _load_env(self.env_encrypted)

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        self.env_encrypted = json.dumps(value, sort_keys=True) if value else ""


class SecureCLIBinary(EncryptedEnv, TenantScoped):
    binary_name = models.CharField(max_length=64)
    binary_path = models.TextField(blank=True, default="")  # "": found on the safe PATH
    description = models.TextField(blank=True, default="")
    deny_args = models.JSONField(default=list, blank=True)
    deny_verbose = models.JSONField(default=list, blank=True)
    timeout_seconds = models.PositiveIntegerField(default=DEFAULT_TIMEOUT_SECONDS)
    tips = models.TextField(blank=True, default="")
    is_global = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    preset = models.CharField(max_length=32, blank=True, default="")
    created_by = models.CharField(max_length=255)

    class Meta:
        ordering = ["binary_name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "binary_name"], name="secure_cli_unique_binary")
        ]

    def __str__(self) -> str:
        return self.binary_name


class SecureCLIAgentGrant(EncryptedEnv, TenantScoped):
    """An agent's access to a binary. Each override left NULL (an empty env) uses the binary's."""

    binary = models.ForeignKey(SecureCLIBinary, on_delete=models.CASCADE, related_name="grants")
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    deny_args = models.JSONField(null=True, blank=True)
    deny_verbose = models.JSONField(null=True, blank=True)
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    # NULL means "the binary's tips", "" means "no tips for this agent": the two must differ.
    tips = models.TextField(null=True, blank=True)  # noqa: DJ001
    enabled = models.BooleanField(default=True)
    granted_by = models.CharField(max_length=255)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["binary", "agent"], name="secure_cli_unique_agent_grant")
        ]

    def __str__(self) -> str:
        return f"{self.binary_id} -> {self.agent_id}"


class SecureCLIUserCredential(EncryptedEnv, TenantScoped):
    """A user's own environment for a binary: overrides the binary's and the grant's, variable by
    variable, on calls made for that user."""

    binary = models.ForeignKey(SecureCLIBinary, on_delete=models.CASCADE, related_name="user_credentials")
    user_id = models.CharField(max_length=255)
    set_by = models.CharField(max_length=255)

    class Meta:
        ordering = ["user_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["binary", "user_id"], name="secure_cli_unique_user_credential")
        ]

    def __str__(self) -> str:
        return f"{self.binary_id} for {self.user_id}"
