"""Context files: the Markdown files that shape an agent (SOUL.md, IDENTITY.md, AGENTS.md, TOOLS.md,
HEARTBEAT.md, USER.md, BOOTSTRAP.md), stored by Toolgate instead of on disk.

An :class:`AgentContextFile` is the agent's own text (for an open agent, the template every user starts
from); a :class:`UserContextFile` is one user's copy. Which one a tool call reads or writes depends on
the agent's type (:mod:`apps.context_files.routing`).
"""

from __future__ import annotations

from django.db import models

from apps.tenants.scoping import TenantScoped

# The routed files, in the order pages and answers list them (seed 000 §3 and HEARTBEAT.md, SPEC Part A).
NAMES = ("SOUL.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md", "HEARTBEAT.md", "USER.md", "BOOTSTRAP.md")
MAX_CONTENT_BYTES = 256 * 1024
MAX_USER_ID = 255

_NAME_CHOICES = [(name, name) for name in NAMES]


class AgentContextFile(TenantScoped):
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=20, choices=_NAME_CHOICES)
    content = models.TextField(blank=True, default="")
    updated_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "agent", "name"], name="agent_context_file_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.name}"


class UserContextFile(TenantScoped):
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID)
    name = models.CharField(max_length=20, choices=_NAME_CHOICES)
    content = models.TextField(blank=True, default="")
    updated_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "agent", "user_id", "name"], name="user_context_file_unique"
            )
        ]
        indexes = [models.Index(fields=["tenant", "agent", "user_id"], name="user_context_file_scope")]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.user_id}/{self.name}"


class BootstrapCompletion(TenantScoped):
    """A user's first run with the agent is complete: the agent wrote BOOTSTRAP.md empty for them.

    From then on that user reads no BOOTSTRAP.md (not the agent's template either) unless they are
    given a copy of their own again; an administrator can reset it to run the first run anew. The row's
    ``updated_at`` is when the first run was (last) completed."""

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID)
    completed_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "agent", "user_id"], name="bootstrap_completion_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.user_id} bootstrap done"
