"""A session is one conversation of one agent, named by the session key agent loops send with every
tool call (``CallContext.session_key``); its messages are the history, in order (``seq`` from 1).

Who may see a session through the sessions tools: calls of the same agent for the same user (a call
without a user id sees the sessions without one). The API and the dashboard show members of the tenant
every session.
"""

from __future__ import annotations

from django.db import models

from apps.tenants.scoping import TenantScoped

MAX_KEY = 200
MAX_USER_ID = 200
MAX_LABEL = 200
MAX_MESSAGE_CHARS = 200_000
MAX_METADATA_BYTES = 16_384


class Session(TenantScoped):
    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=MAX_KEY)
    user_id = models.CharField(max_length=MAX_USER_ID, blank=True, default="")
    channel = models.CharField(max_length=100, blank=True, default="")
    chat_id = models.CharField(max_length=200, blank=True, default="")
    label = models.CharField(max_length=MAX_LABEL, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    # The session that spawned this one (a subagent's), and how deep in such a chain it is.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    depth = models.PositiveSmallIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    last_message_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "agent", "key"], name="session_key_unique")]
        indexes = [
            models.Index(fields=["tenant", "agent", "user_id", "status"], name="session_scope"),
            models.Index(fields=["tenant", "-last_message_at"], name="session_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.key}"


class SessionMessage(TenantScoped):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        SYSTEM = "system"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    name = models.CharField(max_length=200, blank=True, default="")  # the tool of a tool message
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)  # an assistant message's calls
    # Where it came from: "api", "run", "tool:sessions_send", "channel:<name>", …
    source = models.CharField(max_length=100, blank=True, default="")
    sender = models.CharField(max_length=300, blank=True, default="")  # the actor's label
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="session_message_seq")]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq}"
