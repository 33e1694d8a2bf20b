"""Policy documents (tenant, agent, channel group) and their versions.

A document is GoClaw's tool-policy JSON (``profile``, ``allow``, ``deny``, ``alsoAllow``, ``byProvider``,
``shellDenyGroups``, ``execApproval``, ``rate_limit_per_hour``, ``scrub_credentials``) plus Toolgate's
``originDeny``; which keys each scope takes is in ``apps.policy.documents``. Every save writes a
``PolicyVersion`` (the whole document, the diff, the author), so any state can be restored; versions
keep their scope by value, so the history of a deleted agent's or channel's policy stays readable.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from apps.policy.approval_models import ApprovalRule, PendingApproval  # noqa: F401  (models of this app)
from apps.tenants.scoping import TenantScoped


class Scope(models.TextChoices):
    TENANT = "tenant", "Tenant"
    AGENT = "agent", "Agent"
    CHANNEL = "channel", "Channel group"


class PolicyDocument(TenantScoped):
    """The current policy of one scope: the tenant, one agent, or one channel (optionally one chat)."""

    scope = models.CharField(max_length=10, choices=Scope.choices)
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    channel = models.CharField(max_length=100, blank=True)
    chat_id = models.CharField(max_length=200, blank=True)
    document = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=0)  # the number of the PolicyVersion it equals

    class Meta:
        ordering = ["scope", "channel", "chat_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant"], condition=Q(scope="tenant"), name="policy_one_per_tenant"
            ),
            models.UniqueConstraint(
                fields=["tenant", "agent"], condition=Q(scope="agent"), name="policy_one_per_agent"
            ),
            models.UniqueConstraint(
                fields=["tenant", "channel", "chat_id"],
                condition=Q(scope="channel"),
                name="policy_one_per_channel_chat",
            ),
            models.CheckConstraint(
                condition=(
                    Q(scope="tenant", agent__isnull=True, channel="", chat_id="")
                    | Q(scope="agent", agent__isnull=False, channel="", chat_id="")
                    | (Q(scope="channel", agent__isnull=True) & ~Q(channel=""))
                ),
                name="policy_scope_fields",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} policy v{self.version}"


class PolicyVersion(TenantScoped):
    """One saved state of one scope's policy. ``document`` is None when the save deleted the policy."""

    scope = models.CharField(max_length=10, choices=Scope.choices)
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent_key = models.CharField(max_length=64, blank=True)
    channel = models.CharField(max_length=100, blank=True)
    chat_id = models.CharField(max_length=200, blank=True)
    number = models.PositiveIntegerField()
    document = models.JSONField(null=True, blank=True)
    diff = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=200, blank=True)  # "rollback to v3", "import", "deleted"
    author_kind = models.CharField(max_length=20)
    author_id = models.CharField(max_length=64)
    author_label = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-number"]
        indexes = [
            models.Index(
                fields=["tenant", "scope", "agent_key", "channel", "chat_id", "-number"],
                name="policy_version_scope",
            ),
            models.Index(fields=["tenant", "-created_at"], name="policy_version_time"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} policy v{self.number}"
