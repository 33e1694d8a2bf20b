"""Input and output shapes of the sessions API. Inputs check the JSON shape; values are validated by
``apps.sessions.services``, which reports each problem by field."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.sessions.models import Session, SessionMessage
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import ObjectField, WholeNumberField


def _text(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(allow_blank=True, trim_whitespace=False, **kwargs)


@extend_schema_field({"type": "array", "items": {"type": "object"}})
class CallListField(serializers.JSONField):
    """A list of tool calls (checked by the service)."""


class SessionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent.key")
    # DRF collects declared fields by name; ``parent`` shadows a Field attribute only for the type checker.
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment]

    class Meta:
        model = Session
        fields = [
            "id",
            "agent",
            "key",
            "user_id",
            "channel",
            "chat_id",
            "label",
            "status",
            "parent",
            "depth",
            "message_count",
            "input_tokens",
            "output_tokens",
            "last_message_at",
            "metadata",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class SessionCreateInput(StrictSerializer):
    agent = serializers.CharField(max_length=255, help_text="the agent's key")
    key = _text(help_text="the session key agent loops send with tool calls (1-200 characters)")
    user_id = _text(required=False, default="")
    channel = _text(required=False, default="")
    chat_id = _text(required=False, default="")
    label = _text(required=False, default="")  # type: ignore[assignment]  # shadows Field.label for mypy only
    metadata = ObjectField(required=False, default=dict)


class SessionUpdateInput(StrictSerializer):
    label = _text(required=False)  # type: ignore[assignment]  # shadows Field.label for mypy only
    status = _text(required=False, help_text="active or archived")


class SessionFilterInput(StrictSerializer):
    agent = serializers.CharField(required=False, max_length=255)
    user_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    status = serializers.ChoiceField(required=False, choices=Session.Status.choices)
    q = serializers.CharField(required=False, allow_blank=True, max_length=200)


class MessageOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = SessionMessage
        fields = [
            "id",
            "seq",
            "role",
            "content",
            "name",
            "tool_call_id",
            "tool_calls",
            "source",
            "sender",
            "input_tokens",
            "output_tokens",
            "created_at",
        ]
        read_only_fields = fields


class MessageInput(StrictSerializer):
    role = _text(help_text="user, assistant, tool or system")
    content = _text(required=False, default="")
    name = _text(required=False, default="")
    tool_call_id = _text(required=False, default="")
    tool_calls = CallListField(required=False)
    input_tokens = WholeNumberField(required=False)
    output_tokens = WholeNumberField(required=False)


class MessageFilterInput(StrictSerializer):
    after = serializers.IntegerField(
        required=False, min_value=0, default=0, help_text="messages after this seq"
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class MessagePageOutput(serializers.Serializer):  # type: ignore[type-arg]
    session = serializers.UUIDField()
    message_count = serializers.IntegerField()
    messages = MessageOutput(many=True)
    next_after = serializers.IntegerField(allow_null=True, help_text="pass as after for the next page")
