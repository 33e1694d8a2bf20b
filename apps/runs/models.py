"""A run is one turn of an agent: the model is asked, the tools it calls run through the pipeline, and
it is asked again with their results until it answers without a tool call or reaches its last
iteration. Its messages are the session's (``SessionMessage.source`` ``run:<id>``)."""

from __future__ import annotations

from django.db import models

from apps.tenants.scoping import TenantScoped

MAX_INPUT_CHARS = 100_000
DEFAULT_MAX_ITERATIONS = 20
MAX_ITERATIONS = 50


class Run(TenantScoped):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # a tool call waits for a human's approval; no worker is held meanwhile
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        CHAT = "chat"
        SUBAGENT = "subagent"
        TEAM_TASK = "team_task"
        CRON = "cron"

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="runs")
    user_id = models.CharField(max_length=200, blank=True, default="")

    class Runner(models.TextChoices):
        BUILTIN = "builtin"  # Toolgate's runner (apps.runs.runner) on a django-q2 worker or in the request
        EXTERNAL = "external"  # an agent loop elsewhere claims it (the runs topic) and reports its end

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CHAT)
    runner = models.CharField(max_length=10, choices=Runner.choices, default=Runner.BUILTIN)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    input = models.TextField(blank=True, default="")
    output = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    provider = models.CharField(max_length=64, blank=True, default="")  # a provider's name ("" = default)
    model = models.CharField(max_length=200, blank=True, default="")  # as the provider named it
    max_iterations = models.PositiveSmallIntegerField(default=DEFAULT_MAX_ITERATIONS)
    iterations = models.PositiveSmallIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    depth = models.PositiveSmallIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    label = models.CharField(max_length=200, blank=True, default="")  # a subagent's short name
    # The team task a team_task run works on (the board dispatched it to the run's agent).
    task = models.ForeignKey("teams.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # A subagent's result has been announced to its parent's session (or returned directly: run mode).
    announced = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)  # a finished subagent, hidden from list
    # Who started it: tool calls run as this actor (its role, checked again when the run starts).
    started_by_kind = models.CharField(max_length=10, blank=True, default="")
    started_by_id = models.CharField(max_length=64, blank=True, default="")
    started_by = models.CharField(max_length=300, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # While waiting: the approval asked for, and the tool calls of the model's last answer still to run
    # (the first is the one waiting), each {"id", "name", "arguments"}.
    awaiting_approval = models.UUIDField(null=True, blank=True)
    pending_calls = models.JSONField(default=list, blank=True)
    # While running on a worker of the built-in runner: the worker's lease (renewed at each step) and its
    # token; a job that finds the lease expired takes the run over (apps.runs.runner). ``takeovers``
    # counts how many times a run was taken over from a worker that stopped in the middle of it.
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True)
    takeovers = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "status"], name="run_status"),
            models.Index(fields=["tenant", "awaiting_approval"], name="run_awaiting_approval"),
            models.Index(fields=["tenant", "agent", "-created_at"], name="run_agent_recent"),
            models.Index(fields=["status", "lease_until"], name="run_lease"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.agent_id}"

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED)


# A run at work: queued, running, or waiting for an approval (it counts against every limit).
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING)


class CronJob(TenantScoped):
    """A scheduled job of an agent: at each time of ``schedule`` (a cron expression, or ``every <n>m``
    / ``every <n>h``), it starts a run of the agent with ``message`` as its input, in the session
    ``cron:<job id>`` (kind ``turn``), or sends ``message`` to a messaging channel (kind ``message``).
    Its django-q2 schedule (``q_schedule_id``) is kept in step by ``apps.runs.cron``."""

    class Kind(models.TextChoices):
        TURN = "turn"  # a run of the agent with the message as its input
        MESSAGE = "message"  # the message itself, sent to a messaging channel (no run)

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    schedule = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TURN)
    message = models.TextField()
    channel = models.CharField(max_length=64, blank=True, default="")  # a message job's channel name
    chat_id = models.CharField(max_length=100, blank=True, default="")  # "" = the channel's default chat
    user_id = models.CharField(max_length=200, blank=True, default="")
    enabled = models.BooleanField(default=True)
    q_schedule_id = models.IntegerField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    fire_count = models.PositiveIntegerField(default=0)
    created_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "agent", "name"], name="cron_job_name_unique")
        ]

    def __str__(self) -> str:
        return f"cron {self.name} of {self.agent_id}"


class CronFiring(TenantScoped):
    """One time a job fired: the run it started, or why it did not."""

    class Status(models.TextChoices):
        STARTED = "started"
        SKIPPED = "skipped"  # the previous run of the job was still at work
        FAILED = "failed"

    job = models.ForeignKey(CronJob, on_delete=models.CASCADE, related_name="firings")
    status = models.CharField(max_length=10, choices=Status.choices)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    manual = models.BooleanField(default=False)  # run now, not the schedule
    detail = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
