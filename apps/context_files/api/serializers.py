"""Input and output of the context files API."""

from __future__ import annotations

from rest_framework import serializers

from apps.context_files.models import MAX_CONTENT_BYTES
from apps.tenants.api.base import StrictSerializer


class ContextFileInput(StrictSerializer):
    # The size is checked in bytes by the service; this bounds what is parsed at all.
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=MAX_CONTENT_BYTES)


class AgentFileOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    content = serializers.CharField(allow_null=True, help_text="null: the agent has no text for it")
    size = serializers.IntegerField(allow_null=True, help_text="bytes (UTF-8)")
    per_user = serializers.BooleanField(help_text="users get their own copy; this text is the template")
    routing = serializers.CharField(help_text="what the agent's tools do with this file")
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField(allow_null=True)


class AgentFilesOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent = serializers.CharField()
    type = serializers.CharField()
    files = AgentFileOutput(many=True)


class UserFileOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    content = serializers.CharField()
    size = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    updated_by = serializers.CharField()


class UserFilesOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent = serializers.CharField()
    user_id = serializers.CharField()
    files = UserFileOutput(many=True)


class BootstrapOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent = serializers.CharField()
    user_id = serializers.CharField()
    completed_at = serializers.DateTimeField(
        allow_null=True, help_text="when the agent wrote BOOTSTRAP.md empty for this user (first run done)"
    )
    pending = serializers.BooleanField(
        help_text="whether this user reads a non-empty BOOTSTRAP.md (their first run is not complete)"
    )
