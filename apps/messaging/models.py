"""Messaging channels and the log of what was sent through them.

A channel is where the ``message`` and ``create_forum_topic`` tools send: an outbound webhook (a JSON
POST to a URL, optionally signed with HMAC-SHA256) or a Telegram bot (the Bot API). Its secret (the
webhook's signing secret, the bot token) and extra headers are encrypted at rest with
django-encrypted-model-fields and never returned, logged nor audited.

A channel's ``topics`` map chat or topic ids (``"-100123"``, ``"-100123:topic:45"``) to tool allow lists:
a call whose context names the channel and such a chat may use only those tools (intersected with the
call's own ``tool_allow``).
"""

from __future__ import annotations

import json

from django.core.validators import RegexValidator
from django.db import models
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped

NAME_RE = r"\A[a-z0-9][a-z0-9_-]{0,63}\Z"
name_validator = RegexValidator(
    NAME_RE, "1 to 64 characters: lower-case letters, digits, '-' or '_', starting with a letter or digit."
)
MAX_URL_CHARS = 500
MAX_CHAT_ID_CHARS = 100
TELEGRAM_API_BASE = "https://api.telegram.org"
MAX_TEXT_CHARS = 4096  # Telegram's limit for one message
MAX_ERROR_CHARS = 500


class Channel(TenantScoped):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        TELEGRAM = "telegram", "Telegram"

    name = models.CharField(max_length=64, validators=[name_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    # webhook: where messages are POSTed; telegram: the Bot API base URL.
    url = models.CharField(max_length=MAX_URL_CHARS)
    # webhook: the signing secret (optional); telegram: the bot token. Never returned, logged or audited.
    secret = EncryptedTextField(blank=True, default="")
    extra_headers_encrypted = EncryptedTextField(blank=True, default="")  # JSON object of strings
    default_chat_id = models.CharField(max_length=MAX_CHAT_ID_CHARS, blank=True, default="")
    topics = models.JSONField(default=dict, blank=True)  # chat/topic id -> tool names and groups
    agent_keys = models.JSONField(default=list, blank=True)  # the agents that may use it; [] = all
    created_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="messaging_channel_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def extra_headers(self) -> dict[str, str]:
        if not self.extra_headers_encrypted:
            return {}
        value = json.loads(self.extra_headers_encrypted)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    @extra_headers.setter
    def extra_headers(self, value: dict[str, str]) -> None:
        self.extra_headers_encrypted = json.dumps(value, sort_keys=True) if value else ""

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values no answer, log line or audit record may show."""
        return tuple(v for v in (self.secret, *self.extra_headers.values()) if v)

    def allows_agent(self, agent_key: str) -> bool:
        return not self.agent_keys or agent_key in self.agent_keys


class OutboundMessage(TenantScoped):
    """One send through a channel (a message, a forum topic, a test), whether it worked or not."""

    class Status(models.TextChoices):
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    class Kind(models.TextChoices):
        MESSAGE = "message", "Message"
        FORUM_TOPIC = "forum_topic", "Forum topic"
        TEST = "test", "Test"

    channel = models.ForeignKey(Channel, null=True, on_delete=models.SET_NULL, related_name="messages")
    channel_name = models.CharField(max_length=64)  # kept when the channel is deleted
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    agent_key = models.CharField(max_length=200, blank=True, default="")
    session_key = models.CharField(max_length=200, blank=True, default="")
    user_id = models.CharField(max_length=200, blank=True, default="")
    chat_id = models.CharField(max_length=MAX_CHAT_ID_CHARS, blank=True, default="")
    text = models.TextField(blank=True, default="")  # at most MAX_TEXT_CHARS
    text_bytes = models.PositiveIntegerField(default=0)
    text_sha256 = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices)
    error = models.CharField(max_length=MAX_ERROR_CHARS, blank=True, default="")
    provider_message_id = models.CharField(max_length=100, blank=True, default="")
    latency_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "channel", "-created_at"], name="messaging_out_by_channel")]
