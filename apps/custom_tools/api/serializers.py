"""Input and output shapes of the custom tools API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); every
value is validated by the services (``apps.custom_tools.services`` with ``validation``), which report
each problem by field. Outputs never carry an env value: variables by name only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.custom_tools import services
from apps.custom_tools.models import CustomTool
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import FlagField, ObjectField, StringMapField, WholeNumberField


def _text(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(allow_blank=True, trim_whitespace=False, **kwargs)


@extend_schema_field({"type": "string", "nullable": True})
class AgentKeyField(serializers.CharField):
    """An agent's key, or null for every agent of the tenant."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, max_length=255, **kwargs)


class CustomToolFieldsInput(StrictSerializer):
    description = _text(required=False)
    parameters = ObjectField(required=False, help_text='a JSON Schema of "type": "object"')
    command = _text(required=False, help_text="the shell command; {{.key}} is the argument key, quoted")
    working_dir = _text(required=False, help_text="relative to the agent's workspace; empty: the workspace")
    timeout_seconds = WholeNumberField(required=False, help_text="1 to 600 seconds (default 60)")
    env = StringMapField(required=False, write_only=True, help_text="write-only; replaces the environment")
    agent = AgentKeyField(required=False, help_text="the agent the tool belongs to; null: global")
    enabled = FlagField(required=False)


class CustomToolCreateInput(CustomToolFieldsInput):
    name = serializers.CharField(trim_whitespace=False, max_length=200)
    command = _text(help_text="the shell command; {{.key}} is the argument key, quoted")


class CustomToolUpdateInput(CustomToolFieldsInput):
    name = serializers.CharField(trim_whitespace=False, max_length=200, required=False)


class CustomToolFilterInput(StrictSerializer):
    agent = serializers.CharField(max_length=255, required=False, help_text="one agent's own tools")
    scope = serializers.ChoiceField(choices=["global", "agent"], required=False)
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False)
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class CustomToolOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    scope = serializers.CharField(help_text="global (every agent) or agent (one agent's own)")
    agent = serializers.CharField(allow_null=True, help_text="the agent's key; null for a global tool")
    parameters = serializers.JSONField()
    command = serializers.CharField()
    working_dir = serializers.CharField()
    timeout_seconds = serializers.IntegerField()
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    enabled = serializers.BooleanField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: CustomTool) -> dict[str, Any]:
        data = services.tool_data(instance)
        data.update(
            created_at=serializers.DateTimeField().to_representation(instance.created_at),
            updated_at=serializers.DateTimeField().to_representation(instance.updated_at),
        )
        return data


class TestRunInput(StrictSerializer):
    agent = AgentKeyField(
        required=False, default=None, help_text="whose workspace and settings; an agent's tool: its own"
    )
    args = ObjectField(required=False, default=dict, help_text="sample arguments")
    user_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)


class TestStepOutput(serializers.Serializer):  # type: ignore[type-arg]
    step = serializers.ChoiceField(
        choices=["schema", "render", "working_dir", "safeguard", "deny_groups", "run"]
    )
    ok = serializers.BooleanField()
    detail = serializers.CharField()


class TestRunOutput(serializers.Serializer):  # type: ignore[type-arg]
    tool = serializers.CharField()
    agent = serializers.CharField()
    ok = serializers.BooleanField()
    output = serializers.CharField(help_text="scrubbed; the tool's env values masked")
    rendered_command = serializers.CharField(help_text="as it ran (or would have), secrets masked")
    steps = TestStepOutput(many=True, help_text="the decision path, up to the step that stopped the run")
    stopped_at = serializers.CharField(allow_null=True, help_text="the step that refused the run, if any")
    exit_code = serializers.IntegerField(allow_null=True)
    timed_out = serializers.BooleanField()
    duration_ms = serializers.IntegerField()
