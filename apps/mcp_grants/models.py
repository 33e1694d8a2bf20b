"""MCP servers a tenant registers, the tools discovered on them, the grants that give agents and users
those tools, and the access requests that ask for grants (SPEC Part A "MCP", B §3.1).

Secrets (``headers``, ``env``, ``api_key``) are encrypted at rest (django-encrypted-model-fields with
``FIELD_ENCRYPTION_KEY``); headers and env are stored as encrypted JSON text and read through the
``headers`` / ``env`` properties. They are never returned by the API and never written to the audit log.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped

# Letters and digits in runs joined by single '_' or '-': a registered tool name then has exactly one
# "__", the separator (``naming``), and two servers can only share a prefix by having the same one.
SERVER_NAME_RE = r"\A(?=.{1,64}\Z)[a-z0-9]+(?:[_-][a-z0-9]+)*\Z"
server_name_validator = RegexValidator(
    SERVER_NAME_RE,
    "1 to 64 characters: lower-case letters and digits, joined by single '_' or '-' "
    "(not at the start or end).",
)


def _load_mapping(raw: str) -> dict[str, str]:
    if not raw:
        return {}
    value = json.loads(raw)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class SecretMappings:
    """``headers`` and ``env`` read and written as mappings over their encrypted JSON text."""

    headers_encrypted: str
    env_encrypted: str

    @property
    def headers(self) -> dict[str, str]:
        return _load_mapping(self.headers_encrypted)

    @headers.setter
    def headers(self, value: dict[str, str]) -> None:
        self.headers_encrypted = json.dumps(value, sort_keys=True) if value else ""

    @property
    def env(self) -> dict[str, str]:
        return _load_mapping(self.env_encrypted)

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        self.env_encrypted = json.dumps(value, sort_keys=True) if value else ""


class MCPServer(SecretMappings, TenantScoped):
    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio"
        SSE = "sse", "SSE"
        STREAMABLE_HTTP = "streamable-http", "Streamable HTTP"

    class Status(models.TextChoices):
        UNKNOWN = "unknown", "Unknown"
        CONNECTED = "connected", "Connected"
        DISCONNECTED = "disconnected", "Disconnected"
        ERROR = "error", "Error"

    name = models.CharField(max_length=64, validators=[server_name_validator])
    display_name = models.CharField(max_length=255, blank=True, default="")
    transport = models.CharField(max_length=50, choices=Transport.choices)
    command = models.TextField(blank=True, default="")
    args = models.JSONField(default=list, blank=True)
    url = models.TextField(blank=True, default="")
    headers_encrypted = EncryptedTextField(blank=True, default="")
    env_encrypted = EncryptedTextField(blank=True, default="")
    api_key = EncryptedTextField(blank=True, default="")
    tool_prefix = models.CharField(max_length=50, blank=True, default="")
    # Off: the server's tools keep their own names (``naming``); a name that collides with a built-in
    # tool, a custom tool or another server's tool is not registered (``collisions``).
    prefix_tools = models.BooleanField(default=True)
    # Discovered tools left unregistered because their names collide: ``[{"tool", "reason"}]``.
    tool_conflicts = models.JSONField(default=list, blank=True)
    timeout_sec = models.PositiveIntegerField(default=60)
    # A stdio server runs in a jail; with this off (the default) the jail has no network at all.
    network = models.BooleanField(default=False)
    settings = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.UNKNOWN)
    last_health = models.JSONField(default=dict, blank=True)
    # Discovery that failed is tried again with backoff (``tasks.discover``) until it succeeds: the
    # failed attempts in a row and when the next one runs (cleared on success). A registration, or a
    # change of how the server is reached, raises the generation: retries of an older one are dropped.
    discovery_failures = models.PositiveIntegerField(default=0)
    discovery_retry_at = models.DateTimeField(null=True, blank=True)
    discovery_generation = models.PositiveIntegerField(default=0)
    created_by = models.CharField(max_length=255)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="mcp_server_unique_name")]

    def __str__(self) -> str:
        return self.name


class MCPServerTool(TenantScoped):
    """A tool discovered on a server (its original, unprefixed name)."""

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    input_schema = models.JSONField(default=dict, blank=True)
    # As the server lists them (MCP ``title``, ``outputSchema``, ``annotations``), passed on to MCP
    # clients: the annotations are the server's own claims (hints), which no decision of Toolgate's uses.
    title = models.CharField(max_length=200, blank=True, default="")
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    discovered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="mcp_tool_unique_name")]

    def __str__(self) -> str:
        return self.name


class GrantBase(TenantScoped):
    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="+")
    enabled = models.BooleanField(default=True)
    tool_allow = models.JSONField(null=True, blank=True)  # null: every tool of the server
    tool_deny = models.JSONField(default=list, blank=True)
    # The server's resources and prompts, under the same grant as its tools (README "Resources and
    # prompts"): both switches of the agent's grant, and of the user's when there is one, must be on.
    resources = models.BooleanField(default=True)
    prompts = models.BooleanField(default=True)
    config_overrides = models.JSONField(default=dict, blank=True)
    granted_by = models.CharField(max_length=255)

    class Meta:
        abstract = True

    def filters(self) -> tuple[list[str] | None, list[str]]:
        allow: Any = self.tool_allow
        return (list(allow) if allow is not None else None), list(self.tool_deny or [])


class AgentGrant(GrantBase):
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["server", "agent"], name="mcp_agent_grant_unique")]


class UserGrant(GrantBase):
    user_id = models.CharField(max_length=255)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["server", "user_id"], name="mcp_user_grant_unique")]


class AccessRequest(TenantScoped):
    class Scope(models.TextChoices):
        AGENT = "agent", "Agent"
        USER = "user", "User"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10, choices=Scope.choices)
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    user_id = models.CharField(max_length=255, blank=True, default="")
    tool_allow = models.JSONField(null=True, blank=True)
    # What an approval granted: the request's tool_allow, or fewer (NULL: all tools, or not approved).
    granted_tool_allow = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    requested_by = models.CharField(max_length=255)
    # Who asked, to notify them live when the request is decided: the actor's kind and id.
    requester_kind = models.CharField(max_length=20, blank=True, default="")
    requester_id = models.CharField(max_length=64, blank=True, default="")
    reviewed_by = models.CharField(max_length=255, blank=True, default="")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["tenant", "created_at"], condition=Q(status="pending"), name="mcp_request_pending"
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(scope="user") | Q(agent__isnull=False), name="mcp_request_agent_scope_has_agent"
            ),
            models.CheckConstraint(
                condition=Q(scope="agent") | ~Q(user_id=""), name="mcp_request_user_scope_has_user"
            ),
        ]


class UserCredential(SecretMappings, TenantScoped):
    """A user's own credentials for a server (B §3.1 ``mcp_user_credentials``): when present, that user's
    calls use a connection of their own, opened with these instead of the server's."""

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="user_credentials")
    user_id = models.CharField(max_length=255)
    api_key = EncryptedTextField(blank=True, default="")
    headers_encrypted = EncryptedTextField(blank=True, default="")
    env_encrypted = EncryptedTextField(blank=True, default="")

    class Meta:
        ordering = ["user_id"]
        constraints = [
            models.UniqueConstraint(fields=["server", "user_id"], name="mcp_user_credential_unique")
        ]

    def __str__(self) -> str:
        return f"{self.server_id}:{self.user_id}"


class ResourceSubscription(TenantScoped):
    """A client's ``resources/subscribe`` of one resource of a server, through ``/mcp/<agent>/``: who
    (the API key or user, for which agent) hears ``notifications/resources/updated`` for ``uri`` on
    its update stream (``apps.mcp_grants.subscriptions``). ``credential_user`` is the user whose own
    credentials the server's connection uses ("" for the server's)."""

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    actor_id = models.CharField(max_length=64)
    credential_user = models.CharField(max_length=255, blank=True, default="")
    uri = models.CharField(max_length=2048)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["server", "agent", "actor_id", "credential_user", "uri"],
                name="mcp_subscription_unique",
            )
        ]
        indexes = [models.Index(fields=["server", "credential_user", "uri"], name="mcp_subscription_uri")]
