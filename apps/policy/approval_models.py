"""Pending exec approvals and allow-always rules (SPEC Part A "Exec approvals", B §6.2).

A ``PendingApproval`` is one call that waits for a human: what it would run (the command scrubbed of
credentials, and the shape of every simple command in it), why it asks, who asked, and how it ended
(allowed, denied, timed out). A call that did not wait (``"wait": false``) also keeps what is needed
to run it later (encrypted at rest, cleared once it ran) and, once run, its result.

An ``ApprovalRule`` is an allow-always decision: one agent of one tenant may run the command shape
``shape`` of the binary ``binary_path`` without asking again (never keyed by the basename alone).
Revoking a rule keeps the row, with who revoked it and when.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ALLOWED = "allowed", "Allowed"
    DENIED = "denied", "Denied"
    TIMED_OUT = "timed_out", "Timed out"


class ApprovalDecision(models.TextChoices):
    ALLOW_ONCE = "allow-once", "Allow once"
    ALLOW_ALWAYS = "allow-always", "Allow always"
    DENY = "deny", "Deny"


class PendingApproval(TenantScoped):
    """One exec call waiting for (or past) a human decision."""

    agent = models.ForeignKey("tenants.Agent", null=True, on_delete=models.SET_NULL, related_name="+")
    agent_key = models.CharField(max_length=64)
    call_id = models.CharField(max_length=32)
    tool = models.CharField(max_length=200)
    command = models.TextField()  # scrubbed
    cwd = models.CharField(max_length=1000, blank=True)
    shapes = models.JSONField(default=list, blank=True)  # [{"command", "binary_path", "shape"}]
    reason = models.CharField(max_length=500)
    package_install = models.BooleanField(default=False)
    origin = models.CharField(max_length=20, default="user")
    session_key = models.CharField(max_length=200, blank=True)
    user_id = models.CharField(max_length=200, blank=True)
    requested_by_kind = models.CharField(max_length=20)
    requested_by_id = models.CharField(max_length=64)
    requested_by_label = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=20, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    decision = models.CharField(max_length=20, choices=ApprovalDecision.choices, blank=True)
    decided_by_kind = models.CharField(max_length=20, blank=True)
    decided_by_id = models.CharField(max_length=64, blank=True)
    decided_by_label = models.CharField(max_length=300, blank=True)
    decision_reason = models.CharField(max_length=500, blank=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    wait = models.BooleanField(default=True)
    call_payload = EncryptedTextField(blank=True, default="")  # a call that did not wait, until it ran
    result = models.JSONField(null=True, blank=True)  # {"for_llm", "for_user", "is_error", "duration_ms"}

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "status", "-created_at"], name="approval_status"),
            models.Index(fields=["status", "expires_at"], name="approval_expiry"),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.status})"


class ApprovalRule(TenantScoped):
    """allow-always: ``agent`` may run ``shape`` of ``binary_path`` without asking."""

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    binary_path = models.CharField(max_length=1000)
    shape = models.CharField(max_length=2000)
    command = models.TextField(blank=True)  # the (scrubbed) command it was approved for
    source = models.ForeignKey(
        PendingApproval, null=True, blank=True, on_delete=models.SET_NULL, related_name="rules"
    )
    created_by_kind = models.CharField(max_length=20)
    created_by_id = models.CharField(max_length=64)
    created_by_label = models.CharField(max_length=300, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by_kind = models.CharField(max_length=20, blank=True)
    revoked_by_id = models.CharField(max_length=64, blank=True)
    revoked_by_label = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "agent", "binary_path", "shape"],
                condition=Q(revoked_at__isnull=True),
                name="approval_rule_one_active",
            )
        ]
        indexes = [models.Index(fields=["tenant", "agent", "binary_path"], name="approval_rule_lookup")]

    def __str__(self) -> str:
        return f"rule {self.shape}"
