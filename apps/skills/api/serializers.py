"""Input and output shapes of the skills API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); the
SKILL.md and every field are validated by ``apps.skills.services``, which reports each problem by field.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.skills import loading
from apps.skills.models import (
    MAX_CONTENT_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_SESSION_KEY_CHARS,
    MAX_USER_ID_CHARS,
    Skill,
)
from apps.skills.services import skill_data
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import FlagField


@extend_schema_field({"type": "string", "nullable": True})
class AgentKeyField(serializers.CharField):
    """An agent's key, or null for a skill global to the tenant."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, max_length=255, **kwargs)


@extend_schema_field({"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]})
class TriggersField(serializers.JSONField):
    """A list of phrases, or one comma-separated string (checked by the service)."""


def _text(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(trim_whitespace=False, **kwargs)


class SkillFieldsInput(StrictSerializer):
    content = _text(
        required=False,
        max_length=MAX_CONTENT_CHARS,
        help_text="The whole SKILL.md: YAML frontmatter (name, description, triggers) between '---' lines, "
        "then the Markdown body.",
    )
    name = _text(
        required=False, max_length=200, help_text="Instead of content: lower-case letters, digits, '-'."
    )
    description = _text(required=False, max_length=MAX_DESCRIPTION_CHARS, help_text="Instead of content.")
    triggers = TriggersField(required=False, help_text="Instead of content: phrases that activate the skill.")
    body = _text(
        required=False, allow_blank=True, max_length=MAX_CONTENT_CHARS, help_text="Instead of content."
    )
    agent = AgentKeyField(required=False, help_text="The agent the skill belongs to; null: every agent.")
    enabled = FlagField(required=False)


class SkillReplaceInput(StrictSerializer):
    content = _text(max_length=MAX_CONTENT_CHARS, help_text="The whole SKILL.md.")
    enabled = FlagField(required=False)


class SkillFilterInput(StrictSerializer):
    agent = serializers.CharField(
        max_length=255, required=False, help_text='One agent\'s own skills (its key), or "global".'
    )
    q = serializers.CharField(
        max_length=200, required=False, help_text="In the name, description or triggers."
    )
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class SkillOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    triggers = serializers.ListField(child=serializers.CharField())
    scope = serializers.CharField(help_text="global (every agent) or agent (one agent's own)")
    agent = serializers.CharField(allow_null=True, help_text="the agent's key; null for a global skill")
    enabled = serializers.BooleanField()
    source = serializers.ChoiceField(choices=Skill.Source.values)  # type: ignore[assignment]
    published_from = serializers.CharField(help_text="the workspace directory publish_skill read")
    version = serializers.IntegerField()
    size = serializers.IntegerField(help_text="characters of SKILL.md")
    files = serializers.IntegerField(help_text="files besides SKILL.md")
    created_by = serializers.CharField()
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Skill) -> dict[str, Any]:
        data = skill_data(instance)
        size = getattr(instance, "size", None)
        files = getattr(instance, "file_count", None)
        data.update(
            size=size if size is not None else len(instance.content),
            files=files if files is not None else instance.files.count(),
            created_by=instance.created_by,
            updated_by=instance.updated_by,
            created_at=serializers.DateTimeField().to_representation(instance.created_at),
            updated_at=serializers.DateTimeField().to_representation(instance.updated_at),
        )
        return data


class SkillDetailOutput(SkillOutput):
    content = serializers.CharField()

    def to_representation(self, instance: Skill) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["content"] = instance.content
        return data


class SkillFileOutput(serializers.Serializer):  # type: ignore[type-arg]
    path = serializers.CharField(help_text="relative to the skill's directory")
    size = serializers.IntegerField(help_text="characters")
    content = serializers.CharField()


class SkillUseFilterInput(StrictSerializer):
    skill = serializers.UUIDField(required=False, help_text="one skill's uses")
    agent = serializers.CharField(max_length=255, required=False, help_text="one agent's uses (its key)")
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class SkillUseOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    skill = serializers.UUIDField(allow_null=True, source="skill_id", help_text="null once deleted")
    skill_name = serializers.CharField()
    agent = serializers.CharField(source="agent.key")
    user_id = serializers.CharField()
    session_key = serializers.CharField()
    how = serializers.ChoiceField(choices=["manual", "auto"], help_text="manual: use_skill; auto: a trigger")
    at = serializers.DateTimeField()


class SkillContextInput(StrictSerializer):
    session_key = serializers.CharField(
        max_length=MAX_SESSION_KEY_CHARS, help_text="The conversation (as in the runtime call context)."
    )
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS, required=False, allow_blank=True, default=""
    )
    turn = serializers.IntegerField(
        min_value=0, max_value=loading.MAX_TURN, help_text="The turn number, from 0."
    )
    message = serializers.CharField(
        max_length=loading.MAX_MESSAGE_CHARS,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="The user's message: skills whose triggers it contains are activated (auto).",
    )


class ActiveSkillOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    manual = serializers.BooleanField()
    expires_after_turn = serializers.IntegerField(allow_null=True)
    content = serializers.CharField(allow_null=True, help_text="the SKILL.md body; null when over budget")
    truncated_reason = serializers.CharField(allow_null=True)


class SkillHintOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    description = serializers.CharField()
    trigger = serializers.CharField()


class SkillBudgetOutput(serializers.Serializer):  # type: ignore[type-arg]
    used = serializers.IntegerField()
    limit = serializers.IntegerField()


class SkillContextOutput(serializers.Serializer):  # type: ignore[type-arg]
    active = ActiveSkillOutput(many=True)
    hints = SkillHintOutput(many=True)
    budget = SkillBudgetOutput()
