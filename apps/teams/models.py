"""Agent teams: the team and its members, the task board (tasks, comments, the event trail,
attachments), blocker escalations, the mailbox with per-recipient read state, and the humans granted
access to a team (SPEC Part A "Teams", B §2.1).

Every row carries its tenant. Status changes are made only by ``apps.teams.board`` as single
conditional UPDATEs (B §2.3), never by saving a loaded task.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from apps.tenants.scoping import TenantScoped


class Team(TenantScoped):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        ARCHIVED = "archived", "Archived"

    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, max_length=5000)
    lead = models.ForeignKey("tenants.Agent", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    settings = models.JSONField(default=dict, blank=True)
    created_by = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="team_unique_name"),
            # An agent leads at most one team (B §2.1).
            models.UniqueConstraint(fields=["tenant", "lead"], name="team_one_per_lead"),
        ]

    def __str__(self) -> str:
        return self.name


class TeamMember(TenantScoped):
    class Role(models.TextChoices):
        LEAD = "lead", "Lead"
        MEMBER = "member", "Member"
        REVIEWER = "reviewer", "Reviewer"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="members")
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["team", "agent"], name="team_member_unique")]


class Task(TenantScoped):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        IN_PROGRESS = "in_progress", "In progress"
        COMPLETED = "completed", "Completed"
        BLOCKED = "blocked", "Blocked"
        FAILED = "failed", "Failed"
        IN_REVIEW = "in_review", "In review"
        CANCELLED = "cancelled", "Cancelled"
        STALE = "stale", "Stale"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tasks")
    subject = models.CharField(max_length=500)
    description = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    owner = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    blocked_by = ArrayField(models.UUIDField(), default=list, blank=True)
    priority = models.IntegerField(default=0)
    result = models.TextField(blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    # Where the work came from.
    user_id = models.CharField(max_length=255, blank=True)
    channel = models.CharField(max_length=50, blank=True)
    chat_id = models.CharField(max_length=255, blank=True, default="")
    task_type = models.CharField(max_length=30, default="general")
    number = models.PositiveIntegerField(default=0)  # per (team, chat_id)
    identifier = models.CharField(max_length=20)  # T-001-a3f9
    created_by_agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assignee_user_id = models.CharField(max_length=255, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    require_approval = models.BooleanField(default=False)
    started_at = models.DateTimeField(null=True, blank=True)  # first claim or assignment
    # Lock (the owner's heartbeat renews it).
    locked_at = models.DateTimeField(null=True, blank=True)
    lock_expires_at = models.DateTimeField(null=True, blank=True)
    # Progress.
    progress_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    progress_step = models.CharField(max_length=500, blank=True)
    # Follow-up reminders (ask_user).
    followup_at = models.DateTimeField(null=True, blank=True)
    followup_count = models.PositiveIntegerField(default=0)
    followup_max = models.PositiveIntegerField(default=0)
    followup_message = models.TextField(blank=True)
    followup_channel = models.CharField(max_length=60, blank=True)
    followup_chat_id = models.CharField(max_length=255, blank=True)
    # Counters.
    comment_count = models.PositiveIntegerField(default=0)
    attachment_count = models.PositiveIntegerField(default=0)
    # Search: a full-text vector kept by the database, and an embedding of the subject (any model's
    # dimension; only vectors of one model are compared, see apps.teams.board).
    search_vector = models.GeneratedField(
        expression=SearchVector("subject", "description", config="simple"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(null=True, blank=True)

    class Meta:
        ordering = ["-priority", "created_at"]
        indexes = [
            models.Index(fields=["tenant", "team", "status"], name="task_team_status"),
            models.Index(fields=["team", "channel", "chat_id"], name="task_team_chat"),
            models.Index(fields=["team", "task_type"], name="task_team_type"),
            models.Index(fields=["parent"], name="task_parent"),
            models.Index(
                fields=["lock_expires_at"], condition=Q(status="in_progress"), name="task_lock_expiry"
            ),
            models.Index(fields=["followup_at"], condition=Q(status="in_progress"), name="task_followup"),
            GinIndex(fields=["search_vector"], name="task_search"),
            GinIndex(fields=["blocked_by"], name="task_blocked_by"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["team", "identifier"], name="task_unique_identifier"),
            models.UniqueConstraint(fields=["team", "chat_id", "number"], name="task_unique_number"),
            models.CheckConstraint(
                condition=Q(progress_percent__isnull=True) | Q(progress_percent__lte=100),
                name="task_progress_percent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.identifier} {self.subject}"


class TaskComment(TenantScoped):
    class Type(models.TextChoices):
        NOTE = "note", "Note"
        BLOCKER = "blocker", "Blocker"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    user_id = models.CharField(max_length=255, blank=True)
    content = models.TextField()
    comment_type = models.CharField(max_length=20, choices=Type.choices, default=Type.NOTE)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]


class TaskEvent(TenantScoped):
    """The audit trail of a team's tasks (B §2.6, plus ``deleted`` and ``attachment_added``). It keeps
    the task's number and identifier so that a deleted task's history stays readable."""

    class Type(models.TextChoices):
        CREATED = "created"
        CLAIMED = "claimed"
        ASSIGNED = "assigned"
        DISPATCHED = "dispatched"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        REVIEWED = "reviewed"
        APPROVED = "approved"
        REJECTED = "rejected"
        COMMENTED = "commented"
        PROGRESS = "progress"
        UPDATED = "updated"
        STALE = "stale"
        RECOVERED = "recovered"
        UNBLOCKED = "unblocked"
        RETRIED = "retried"
        DELETED = "deleted"
        ATTACHMENT_ADDED = "attachment_added"

    class ActorType(models.TextChoices):
        AGENT = "agent"
        HUMAN = "human"
        SYSTEM = "system"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    task_number = models.PositiveIntegerField(default=0)
    task_identifier = models.CharField(max_length=20)
    event_type = models.CharField(max_length=30, choices=Type.choices)
    actor_type = models.CharField(max_length=10, choices=ActorType.choices)
    actor_id = models.CharField(max_length=255)
    data = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["tenant", "team", "-created_at", "-id"], name="task_event_team_time"),
            models.Index(fields=["task", "created_at"], name="task_event_task"),
        ]


class TaskAttachment(TenantScoped):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="attachments")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    chat_id = models.CharField(max_length=255, blank=True, default="")
    path = models.TextField()
    file_size = models.BigIntegerField(default=0)
    mime_type = models.CharField(max_length=255, blank=True)
    created_by_agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_sender_id = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["task", "path"], name="task_attachment_unique_path")]


class Escalation(TenantScoped):
    """A member blocked on a task, escalated to the lead (B §2.5); humans follow it to resolution."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        RETRIED = "retried", "Retried"
        RESOLVED = "resolved", "Resolved"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="escalations")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="escalations")
    member = models.ForeignKey("tenants.Agent", null=True, on_delete=models.SET_NULL, related_name="+")
    comment = models.ForeignKey(TaskComment, null=True, on_delete=models.SET_NULL, related_name="+")
    blocker = models.TextField()
    notified_lead = models.BooleanField(default=True)  # False when the team turned escalation off
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "team", "state"], name="escalation_team_state")]


class TeamMessage(TenantScoped):
    class Type(models.TextChoices):
        CHAT = "chat", "Chat"
        BROADCAST = "broadcast", "Broadcast"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="messages")
    from_agent = models.ForeignKey("tenants.Agent", null=True, on_delete=models.SET_NULL, related_name="+")
    to_agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )  # None: a broadcast to every member but the sender
    content = models.TextField()
    message_type = models.CharField(max_length=20, choices=Type.choices, default=Type.CHAT)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["team", "to_agent", "created_at"], name="team_message_inbox")]


class TeamMessageRead(TenantScoped):
    """One recipient has read one message (read state is per recipient, SPEC Part A)."""

    message = models.ForeignKey(TeamMessage, on_delete=models.CASCADE, related_name="reads")
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "agent"], name="team_message_read_once")]


class TeamUserGrant(TenantScoped):
    """A human (dashboard user or external user id) who may view or act on a team's board."""

    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        OPERATOR = "operator", "Operator"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="user_grants")
    user_id = models.CharField(max_length=255)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.VIEWER)
    granted_by = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["team", "user_id"], name="team_user_grant_unique")]
