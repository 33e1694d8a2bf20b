"""The record of each sandbox container (apps/sandbox): which tenant, agent and scope it serves,
and when it was made and last used. Docker holds the container; this row is how every process finds it,
how the dashboard lists it per tenant, and what the pruning job reads (idle 24 h, older than 7 days)."""

from __future__ import annotations

from django.db import models

from apps.tenants.scoping import TenantScoped


class SandboxContainer(TenantScoped):
    class Scope(models.TextChoices):
        SESSION = "session"
        AGENT = "agent"
        SHARED = "shared"

    # What the container serves: a digest of (tenant, scope, agent, session, workspace); one row each.
    key = models.CharField(max_length=64)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    session_key = models.CharField(max_length=500, blank=True)  # shown in the dashboard (session scope)
    name = models.CharField(max_length=128)  # the Docker container name (unique on the engine)
    container_id = models.CharField(max_length=80)
    image = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=32)  # of the configuration it was made with
    workspace_access = models.CharField(max_length=4)
    limits = models.JSONField(default=dict)  # memory_mb, cpus, pids_limit, network, read_only_root …
    last_used_at = models.DateTimeField(db_index=True)
    exec_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="sandbox_container_unique_key")]
        ordering = ["-last_used_at"]
        db_table = "runtime_sandboxcontainer"  # made by the runtime app, which held the model before

    def __str__(self) -> str:
        return self.name
