"""Input and output shapes of the credentialed CLIs API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); the
values are validated by ``apps.secure_cli.services``, which reports each problem by field. Outputs never
carry a secret: environments by variable name only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.secure_cli import services
from apps.secure_cli.models import SecureCLIAgentGrant, SecureCLIBinary, SecureCLIUserCredential
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import STRING_LIST, FlagField, StringListField, StringMapField


@extend_schema_field({"type": "integer", "nullable": True})
class WholeNumberField(serializers.JSONField):
    """A JSON integer or null (checked by the service)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


@extend_schema_field({**STRING_LIST, "nullable": True})
class PatternListField(serializers.JSONField):
    """Regular expressions, or null (checked by the service)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


def _text(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(allow_blank=True, trim_whitespace=False, **kwargs)


class SecureCLIBinaryFieldsInput(StrictSerializer):
    binary_name = serializers.CharField(required=False, trim_whitespace=False)
    binary_path = _text(required=False, help_text="absolute path; empty: found on the safe PATH")
    description = _text(required=False)
    env = StringMapField(required=False, write_only=True, help_text="write-only; replaces the environment")
    deny_args = StringListField(required=False, help_text="searched in the arguments joined with spaces")
    deny_verbose = StringListField(required=False, help_text="start-anchored, matched per argument")
    timeout_seconds = WholeNumberField(required=False, help_text="1 to 3600")
    tips = _text(required=False, help_text="guidance shown to agents")
    is_global = FlagField(required=False, help_text="false: only agents with a grant reach it")
    enabled = FlagField(required=False)


class SecureCLIBinaryCreateInput(SecureCLIBinaryFieldsInput):
    preset = serializers.CharField(required=False, help_text="gh, gcloud, aws, kubectl or terraform")


class SecureCLIBinaryOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    binary_name = serializers.CharField()
    binary_path = serializers.CharField()
    description = serializers.CharField()
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    deny_args = serializers.ListField(child=serializers.CharField())
    deny_verbose = serializers.ListField(child=serializers.CharField())
    timeout_seconds = serializers.IntegerField()
    tips = serializers.CharField()
    is_global = serializers.BooleanField()
    enabled = serializers.BooleanField()
    preset = serializers.CharField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: SecureCLIBinary) -> dict[str, Any]:
        return {
            **services.binary_data(instance),
            "created_at": instance.created_at.isoformat(),
            "updated_at": instance.updated_at.isoformat(),
        }


class SecureCLIGrantInput(StrictSerializer):
    """The whole grant: overrides left out or null use the binary's settings; ``env`` left out keeps
    the grant's own environment."""

    enabled = FlagField(required=False)
    deny_args = PatternListField(required=False)
    deny_verbose = PatternListField(required=False)
    timeout_seconds = WholeNumberField(required=False)
    tips = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    env = StringMapField(
        required=False, write_only=True, help_text="write-only; replaces the grant's environment"
    )


class SecureCLIGrantOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    binary = serializers.CharField()
    binary_id = serializers.UUIDField()
    agent = serializers.CharField()
    enabled = serializers.BooleanField()
    deny_args = serializers.ListField(child=serializers.CharField(), allow_null=True)
    deny_verbose = serializers.ListField(child=serializers.CharField(), allow_null=True)
    timeout_seconds = serializers.IntegerField(allow_null=True)
    tips = serializers.CharField(allow_null=True)
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    granted_by = serializers.CharField()

    def to_representation(self, instance: SecureCLIAgentGrant) -> dict[str, Any]:
        return services.grant_data(instance)


class SecureCLICredentialInput(StrictSerializer):
    env = StringMapField(write_only=True, help_text="write-only; the user's own variables")


class SecureCLICredentialOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    binary = serializers.CharField()
    binary_id = serializers.UUIDField()
    user_id = serializers.CharField()
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    set_by = serializers.CharField()

    def to_representation(self, instance: SecureCLIUserCredential) -> dict[str, Any]:
        return services.credential_data(instance)


class SecureCLITestInput(StrictSerializer):
    agent = serializers.CharField(help_text="the agent key to run as")
    args = StringListField(required=False, help_text="sample arguments")
    user_id = serializers.CharField(required=False, default="", allow_blank=True)


class SecureCLITestOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    binary_name = serializers.CharField()
    agent = serializers.CharField()
    user_id = serializers.CharField()
    command = serializers.CharField(help_text="the command run, credentials masked")
    ok = serializers.BooleanField()
    exit_code = serializers.IntegerField(allow_null=True)
    timed_out = serializers.BooleanField()
    output = serializers.CharField(help_text="scrubbed output")
    decision = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    duration_ms = serializers.FloatField()
