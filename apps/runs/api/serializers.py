"""Input and output shapes of the runs API."""

from __future__ import annotations

from rest_framework import serializers

from apps.mcp_grants.api.serializers import WholeNumberField
from apps.runs.models import Run
from apps.tenants.api.base import StrictSerializer


class RunOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent.key")
    session_key = serializers.CharField(source="session.key")
    # DRF collects declared fields by name; ``parent`` shadows a Field attribute only for the type checker.
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment]

    class Meta:
        model = Run
        fields = [
            "id",
            "agent",
            "session",
            "session_key",
            "user_id",
            "kind",
            "status",
            "input",
            "output",
            "error",
            "provider",
            "model",
            "max_iterations",
            "iterations",
            "tool_calls",
            "input_tokens",
            "output_tokens",
            "parent",
            "depth",
            "cancel_requested",
            "started_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class RunCreateInput(StrictSerializer):
    session_key = serializers.CharField(
        max_length=200, help_text="the session the run speaks in (opened if new)"
    )
    message = serializers.CharField(trim_whitespace=False, help_text="what the agent should answer or do")
    user_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    provider = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    max_iterations = WholeNumberField(required=False, help_text="1-50 (default 20)")
    wait = serializers.BooleanField(
        required=False,
        default=True,
        help_text="true: answer when the run ends; false: 202 at once, the run queued",
    )


class RunFilterInput(StrictSerializer):
    agent = serializers.CharField(required=False, max_length=255)
    status = serializers.ChoiceField(required=False, choices=Run.Status.choices)
    session = serializers.UUIDField(required=False)
