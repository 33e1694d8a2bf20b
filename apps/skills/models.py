"""Skills: SKILL.md documents an agent loads on demand (seed 003 "Skill System").

A :class:`Skill` is global to its tenant (``agent`` null: every agent sees it) or one agent's; an
agent's own skill shadows a global one of the same name. ``content`` is the whole SKILL.md text (YAML
frontmatter with ``name``, ``description`` and ``triggers``, then the Markdown body); ``name``,
``description`` and ``triggers`` are kept in step with the frontmatter by the services. A published
skill (``publish_skill``) also keeps the other text files of its directory as :class:`SkillFile` rows.

:class:`SkillUse` rows say who used which skill and how (``use_skill``: manual; a trigger in the user's
message: auto). :class:`SkillActivation` rows are the skills active in one conversation (agent, user,
session) under the loading rules of :mod:`apps.skills.loading`.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.tenants.scoping import TenantScoped

NAME_RE = r"\A[a-z0-9][a-z0-9-]{0,63}\Z"
name_validator = RegexValidator(
    NAME_RE, "1 to 64 characters: lower-case letters, digits and '-', starting with a letter or digit."
)
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_TRIGGERS = 20
MAX_TRIGGER_CHARS = 100
MAX_CONTENT_CHARS = 64_000  # the whole SKILL.md
MAX_FILES = 20  # other files of a published skill
MAX_FILE_CHARS = 64_000
MAX_FILE_PATH_CHARS = 255
MAX_PUBLISHED_FROM_CHARS = 500
MAX_USER_ID_CHARS = 200  # as the call context of the runtime API
MAX_SESSION_KEY_CHARS = 200


class Skill(TenantScoped):
    class Source(models.TextChoices):
        DASHBOARD = "dashboard"
        API = "api"
        PUBLISH = "publish"

    agent = models.ForeignKey(
        "tenants.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=MAX_NAME_CHARS, validators=[name_validator])
    description = models.CharField(max_length=MAX_DESCRIPTION_CHARS)
    triggers = models.JSONField(default=list, blank=True)  # list[str]
    content = models.TextField(max_length=MAX_CONTENT_CHARS)
    enabled = models.BooleanField(default=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.API)
    published_from = models.CharField(max_length=MAX_PUBLISHED_FROM_CHARS, blank=True, default="")
    version = models.PositiveIntegerField(default=1)  # raised by every change of the content
    created_by = models.CharField(max_length=300, blank=True, default="")
    updated_by = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"], condition=Q(agent__isnull=True), name="skill_unique_global"
            ),
            models.UniqueConstraint(
                fields=["tenant", "agent", "name"],
                condition=Q(agent__isnull=False),
                name="skill_unique_per_agent",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "agent"], name="skill_agent")]

    def __str__(self) -> str:
        return self.name

    @property
    def scope(self) -> str:
        return "agent" if self.agent_id else "global"


class SkillFile(TenantScoped):
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=MAX_FILE_PATH_CHARS)  # relative to the skill's directory
    content = models.TextField(max_length=MAX_FILE_CHARS)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["skill", "path"], name="skill_file_unique")]

    def __str__(self) -> str:
        return self.path


class SkillUse(TenantScoped):
    class How(models.TextChoices):
        MANUAL = "manual"  # use_skill
        AUTO = "auto"  # a trigger in the user's message

    skill = models.ForeignKey(Skill, null=True, blank=True, on_delete=models.SET_NULL, related_name="uses")
    skill_name = models.CharField(max_length=MAX_NAME_CHARS)  # kept when the skill is deleted
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID_CHARS, blank=True, default="")
    session_key = models.CharField(max_length=MAX_SESSION_KEY_CHARS, blank=True, default="")
    how = models.CharField(max_length=10, choices=How.choices)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "-at"], name="skill_use_recent"),
            models.Index(fields=["tenant", "skill", "-at"], name="skill_use_skill"),
        ]

    def __str__(self) -> str:
        return f"{self.skill_name} ({self.how})"


class SkillActivation(TenantScoped):
    """A skill active in one conversation. ``last_used_turn`` is None until the agent loop reports the
    next turn (``use_skill`` runs mid-turn and does not know its number)."""

    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID_CHARS, blank=True, default="")
    session_key = models.CharField(max_length=MAX_SESSION_KEY_CHARS, blank=True, default="")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="+")
    manual = models.BooleanField(default=False)
    activated_turn = models.PositiveIntegerField(null=True, blank=True)
    last_used_turn = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "agent", "user_id", "session_key", "skill"],
                name="skill_activation_unique",
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "agent", "user_id", "session_key"], name="skill_activation_chat")
        ]

    def __str__(self) -> str:
        return f"{self.skill_id}@{self.session_key}"
