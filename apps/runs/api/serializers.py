"""Input and output shapes of the runs API."""

from __future__ import annotations

from rest_framework import serializers

from apps.runs.models import Run
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import WholeNumberField


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
            "runner",
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
            "awaiting_approval",
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
    runner = serializers.ChoiceField(
        choices=Run.Runner.choices,
        required=False,
        default=Run.Runner.BUILTIN,
        help_text="builtin: Toolgate runs it; external: your runner claims it (POST runs/<id>/claim)",
    )


class RunFinishInput(StrictSerializer):
    status = serializers.CharField(help_text="completed, failed or cancelled")
    output = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    error = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    iterations = WholeNumberField(required=False)
    tool_calls = WholeNumberField(required=False)
    input_tokens = WholeNumberField(required=False)
    output_tokens = WholeNumberField(required=False)
    model = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")


class RunFilterInput(StrictSerializer):
    agent = serializers.CharField(required=False, max_length=255)
    status = serializers.ChoiceField(required=False, choices=Run.Status.choices)
    session = serializers.UUIDField(required=False)


class CronJobOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent.key")

    class Meta:
        from apps.runs.models import CronJob

        model = CronJob
        fields = [
            "id",
            "agent",
            "name",
            "schedule",
            "kind",
            "message",
            "channel",
            "chat_id",
            "user_id",
            "enabled",
            "next_run_at",
            "last_fired_at",
            "fire_count",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class CronJobCreateInput(StrictSerializer):
    agent = serializers.CharField(max_length=255)
    name = serializers.CharField(max_length=100)
    schedule = serializers.CharField(
        max_length=100, help_text="a cron expression (UTC) or every <n>m / every <n>h"
    )
    message = serializers.CharField(trim_whitespace=False)
    user_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    enabled = serializers.BooleanField(required=False, default=True)
    kind = serializers.CharField(required=False, default="turn", help_text="turn or message")
    channel = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=64, help_text="message jobs: the channel"
    )
    chat_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=100)


class CronJobUpdateInput(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False)
    schedule = serializers.CharField(max_length=100, required=False)
    message = serializers.CharField(trim_whitespace=False, required=False)
    enabled = serializers.BooleanField(required=False)


class CronFiringOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    run_status = serializers.CharField(source="run.status", allow_null=True, default=None)

    class Meta:
        from apps.runs.models import CronFiring

        model = CronFiring
        fields = ["id", "status", "manual", "detail", "run", "run_status", "created_at"]
        read_only_fields = fields
