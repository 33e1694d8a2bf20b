"""Input and output shapes of the teams API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.teams import board
from apps.teams.models import Escalation, Task, TaskComment, TaskEvent, TeamUserGrant
from apps.teams.selectors import TaskDetail, truncate_result
from apps.tenants.api.base import StrictSerializer

AGENT_KEY_MAX = 64
STATUS_GROUPS = ("all", "active")


@extend_schema_field(OpenApiTypes.OBJECT)
class SettingsField(serializers.JSONField):
    """A team's settings document: any JSON here; its keys are checked by ``apps.teams.team_settings``."""


class NamedChoiceField(serializers.ChoiceField):
    """A choice with its own component in the OpenAPI document (``TaskStatus``, ``CommentType``…), so
    the generic field names status, state, role and type never collide with other apps' choices."""


_CHOICE_FIELDS: dict[str, type[NamedChoiceField]] = {}


def choice(component: str, choices: list[tuple[str, str]], **kwargs: Any) -> serializers.ChoiceField:
    field_class = _CHOICE_FIELDS.get(component)
    if field_class is None:
        schema = {"type": "string", "enum": [value for value, _ in choices]}
        field_class = extend_schema_field(schema, component_name=component)(
            type(f"{component}Field", (NamedChoiceField,), {})
        )
        _CHOICE_FIELDS[component] = field_class
    field: serializers.ChoiceField = field_class(choices=choices, **kwargs)
    return field


# --- teams ---------------------------------------------------------------------------------------------


class TeamMemberOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent.key")
    name = serializers.CharField(source="agent.name")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField(source="created_at")


class TeamOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    lead = serializers.CharField(source="lead.key", help_text="the lead agent's key")
    status = serializers.CharField()
    settings = SettingsField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    members = TeamMemberOutput(many=True, source="members.all")


class TeamCreateInput(StrictSerializer):
    name = serializers.CharField(max_length=255)
    lead = serializers.CharField(max_length=AGENT_KEY_MAX, help_text="the lead agent's key")
    members = serializers.ListField(
        child=serializers.CharField(max_length=AGENT_KEY_MAX),
        min_length=1,
        max_length=100,
        help_text="the other members' agent keys (at least one besides the lead)",
    )
    description = serializers.CharField(max_length=5000, required=False, allow_blank=True, default="")
    settings = SettingsField(required=False, default=dict)


class TeamUpdateInput(StrictSerializer):
    name = serializers.CharField(max_length=255, required=False)
    description = serializers.CharField(max_length=5000, required=False, allow_blank=True)
    settings = SettingsField(required=False, help_text="replaces the whole settings document")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("Nothing to change: give name, description or settings.")
        return attrs


class TeamFilterInput(StrictSerializer):
    status = serializers.ChoiceField(choices=["active", "archived"], required=False)
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class MemberAddInput(StrictSerializer):
    agent = serializers.CharField(max_length=AGENT_KEY_MAX, help_text="the agent's key")


# --- tasks ---------------------------------------------------------------------------------------------


class TaskOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    team = serializers.UUIDField(source="team_id")
    identifier = serializers.CharField(help_text="T-<number>-<4 hex>, e.g. T-001-a3f9")
    number = serializers.IntegerField(help_text="numbered per team and chat")
    subject = serializers.CharField()
    description = serializers.CharField()
    status = choice("TaskStatus", Task.Status.choices)
    owner = serializers.CharField(source="owner.key", allow_null=True, help_text="the owner agent's key")
    priority = serializers.IntegerField()
    task_type = serializers.CharField()
    blocked_by = serializers.ListField(child=serializers.UUIDField())
    require_approval = serializers.BooleanField()
    result = serializers.CharField()
    progress_percent = serializers.IntegerField(allow_null=True)
    progress_step = serializers.CharField()
    user_id = serializers.CharField()
    channel = serializers.CharField()
    chat_id = serializers.CharField()
    # DRF collects declared fields by name; these shadow Field attributes only for the type checker.
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment]
    created_by_agent = serializers.CharField(source="created_by_agent.key", allow_null=True)
    comment_count = serializers.IntegerField()
    attachment_count = serializers.IntegerField()
    started_at = serializers.DateTimeField(allow_null=True)
    locked_at = serializers.DateTimeField(allow_null=True)
    lock_expires_at = serializers.DateTimeField(allow_null=True)
    followup_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class TaskListOutput(TaskOutput):
    """A task in a list: its result cut to the first 500 characters (the detail has all of it)."""

    def to_representation(self, instance: Task) -> dict[str, Any]:
        body: dict[str, Any] = super().to_representation(instance)
        body["result"] = truncate_result(body["result"], board.PREVIEW_CHARS)
        return body


class BlockerOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    identifier = serializers.CharField()
    subject = serializers.CharField()
    status = serializers.CharField()
    owner = serializers.CharField(source="owner.key", allow_null=True)


class CommentOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    type = serializers.CharField(source="comment_type")
    agent = serializers.CharField(source="agent.key", allow_null=True)
    user_id = serializers.CharField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()


class TaskEventOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    task = serializers.UUIDField(source="task_id", allow_null=True, help_text="null once the task is deleted")
    task_number = serializers.IntegerField()
    task_identifier = serializers.CharField()
    event_type = choice("TaskEventType", TaskEvent.Type.choices)
    actor_type = serializers.CharField()
    actor_id = serializers.CharField()
    data = serializers.JSONField(allow_null=True)  # type: ignore[assignment]
    created_at = serializers.DateTimeField()


class AttachmentOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    path = serializers.CharField()
    file_size = serializers.IntegerField()
    mime_type = serializers.CharField()
    created_by_agent = serializers.CharField(source="created_by_agent.key", allow_null=True)
    created_by_sender_id = serializers.CharField()
    created_at = serializers.DateTimeField()


class TaskDetailOutput(TaskOutput):
    """A task with the tasks it waits on, its comments, events and attachments (oldest first, at most
    500 of each; the whole trail is under ``events/?task=<id>``)."""

    blockers = BlockerOutput(many=True, help_text="the tasks this one waits on")
    comments = CommentOutput(many=True)
    events = TaskEventOutput(many=True)
    attachments = AttachmentOutput(many=True)

    def to_representation(self, instance: TaskDetail) -> dict[str, Any]:
        body: dict[str, Any] = dict(TaskOutput(instance.task).data)
        waits_on = [instance.blockers[b] for b in instance.task.blocked_by if b in instance.blockers]
        body["blockers"] = BlockerOutput(waits_on, many=True).data
        body["comments"] = CommentOutput(instance.comments, many=True).data
        body["events"] = TaskEventOutput(instance.events, many=True).data
        body["attachments"] = AttachmentOutput(instance.attachments, many=True).data
        return body


class TaskFilterInput(StrictSerializer):
    status = serializers.CharField(
        max_length=200,
        required=False,
        help_text="statuses separated by commas; or active (not completed or cancelled); or all",
    )
    owner = serializers.CharField(max_length=AGENT_KEY_MAX, required=False, help_text="an agent key")
    chat_id = serializers.CharField(max_length=255, required=False, allow_blank=True)
    task_type = serializers.CharField(max_length=30, required=False)
    q = serializers.CharField(max_length=500, required=False, help_text="full-text search, ranked")
    cursor = serializers.CharField(required=False)
    page = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)

    def validate_status(self, value: str) -> list[str]:
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if parts in ([], ["all"]):
            return []
        if parts == ["active"]:
            return [s for s in Task.Status.values if s not in (Task.Status.COMPLETED, Task.Status.CANCELLED)]
        unknown = [p for p in parts if p not in Task.Status.values]
        if unknown:
            raise serializers.ValidationError(
                f"Unknown status {unknown[0][:40]!r}; use {', '.join(Task.Status.values)} (comma-separated), "
                "active or all."
            )
        return parts

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("q") and "cursor" in attrs:
            raise serializers.ValidationError(
                {"cursor": ["Search results are ranked; page through them with page, not cursor."]}
            )
        if "cursor" in attrs and "page" in attrs:
            raise serializers.ValidationError({"page": ["Give cursor or page, not both."]})
        return attrs


class TaskCreateInput(StrictSerializer):
    subject = serializers.CharField(max_length=board.SUBJECT_MAX)
    description = serializers.CharField(
        max_length=board.DESCRIPTION_MAX,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
    )
    priority = serializers.IntegerField(min_value=-1000, max_value=1000, required=False, default=0)
    owner = serializers.CharField(
        max_length=AGENT_KEY_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="a member's agent key; without one, any member may claim the task",
    )
    blocked_by = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=100, required=False, default=list
    )
    require_approval = serializers.BooleanField(required=False, default=False)
    task_type = serializers.CharField(max_length=30, required=False, default="general")
    chat_id = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")


class TaskUpdateInput(StrictSerializer):
    subject = serializers.CharField(max_length=board.SUBJECT_MAX, required=False)
    description = serializers.CharField(
        max_length=board.DESCRIPTION_MAX, required=False, allow_blank=True, trim_whitespace=False
    )
    priority = serializers.IntegerField(min_value=-1000, max_value=1000, required=False)
    blocked_by = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=100, required=False
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError(
                "no updates provided (set subject, description, priority or blocked_by)"
            )
        return attrs


class AssignInput(StrictSerializer):
    agent = serializers.CharField(max_length=AGENT_KEY_MAX, help_text="a member's agent key")


class ReasonInput(StrictSerializer):
    reason = serializers.CharField(
        max_length=board.REASON_MAX_CHARS, required=False, allow_blank=True, default=""
    )


class RetryInput(StrictSerializer):
    reason = serializers.CharField(
        max_length=board.REASON_MAX_CHARS, required=False, allow_blank=True, default=""
    )
    instructions = serializers.CharField(
        max_length=board.INSTRUCTIONS_MAX_CHARS,
        required=False,
        allow_blank=True,
        default="",
        help_text="New instructions for the member: they go, whole, into the retried task's dispatch "
        "message and are kept as a comment.",
    )


class CommentInput(StrictSerializer):
    text = serializers.CharField(
        max_length=board.COMMENT_MAX_BYTES,
        trim_whitespace=False,
        help_text=f"at most {board.COMMENT_MAX_BYTES} bytes",
    )
    type = choice("CommentType", TaskComment.Type.choices, required=False, default="note")


class EscalationOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    task = BlockerOutput()
    member = serializers.CharField(source="member.key", allow_null=True)
    blocker = serializers.CharField()
    notified_lead = serializers.BooleanField(help_text="false when the team turned escalation off")
    state = choice("EscalationState", Escalation.State.choices)
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolved_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class CommentedOutput(serializers.Serializer):  # type: ignore[type-arg]
    comment = CommentOutput()
    task = TaskOutput()
    failed = serializers.BooleanField(help_text="the blocker failed the task")
    escalation = EscalationOutput(allow_null=True)
    message = serializers.CharField()


class EscalationFilterInput(StrictSerializer):
    state = choice("EscalationState", Escalation.State.choices, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class TaskEventFilterInput(StrictSerializer):
    task = serializers.UUIDField(required=False)
    event_type = choice("TaskEventType", TaskEvent.Type.choices, required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


# --- grants --------------------------------------------------------------------------------------------


class GrantOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    team = serializers.UUIDField(source="team_id")
    user_id = serializers.CharField()
    role = choice("TeamGrantRole", TeamUserGrant.Role.choices)
    granted_by = serializers.CharField()
    created_at = serializers.DateTimeField()


class GrantCreateInput(StrictSerializer):
    user_id = serializers.CharField(
        max_length=255, help_text="a dashboard user's email or an external user id"
    )
    role = choice("TeamGrantRole", TeamUserGrant.Role.choices, required=False, default="viewer")
