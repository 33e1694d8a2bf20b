"""Input and output shapes of the providers API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); every
value is validated by ``apps.llm.services`` (with ``validation``), which reports each problem by field.
Outputs never carry the key or a header value: whether a key is set and its last four characters, the
header names.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.llm import services
from apps.llm.models import CAPABILITIES, Provider
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import FlagField, StringMapField, WholeNumberField

MODELS_HELP = "capability to model name: " + ", ".join(f"{c} ({u})" for c, u in CAPABILITIES.items())


class ProviderFieldsInput(StrictSerializer):
    name = serializers.CharField(required=False, trim_whitespace=False, max_length=200)
    kind = serializers.CharField(required=False, help_text="openai_compatible")
    base_url = serializers.CharField(required=False, trim_whitespace=False, max_length=1000)
    api_key = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        write_only=True,
        max_length=2000,
        help_text="write-only; leave out to keep the stored key, empty to clear it",
    )
    extra_headers = StringMapField(
        required=False, write_only=True, help_text="write-only; replaces every header"
    )
    models = StringMapField(required=False, help_text=MODELS_HELP + "; an update changes the ones it names")
    timeout_seconds = WholeNumberField(required=False, help_text="1 to 600 seconds (default 60)")
    enabled = FlagField(required=False)
    is_default = FlagField(required=False, help_text="the provider tools use unless told another")


class ProviderCreateInput(ProviderFieldsInput):
    name = serializers.CharField(trim_whitespace=False, max_length=200)
    base_url = serializers.CharField(trim_whitespace=False, max_length=1000)


class ProviderUpdateInput(ProviderFieldsInput):
    pass


class ProviderOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    base_url = serializers.CharField()
    api_key_set = serializers.BooleanField()
    api_key_last4 = serializers.CharField(help_text="the key's last 4 characters (empty for short keys)")
    extra_headers = serializers.ListField(
        child=serializers.CharField(), help_text="header names (values never)"
    )
    models = serializers.DictField(child=serializers.CharField(allow_blank=True), help_text=MODELS_HELP)
    timeout_seconds = serializers.IntegerField()
    enabled = serializers.BooleanField()
    is_default = serializers.BooleanField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Provider) -> dict[str, Any]:
        data = services.provider_data(instance)
        data.update(
            api_key_last4=services.key_hint(instance.api_key),
            created_at=serializers.DateTimeField().to_representation(instance.created_at),
            updated_at=serializers.DateTimeField().to_representation(instance.updated_at),
        )
        return data


class ProviderTestOutput(serializers.Serializer):  # type: ignore[type-arg]
    ok = serializers.BooleanField()
    latency_ms = serializers.IntegerField()
    models = serializers.ListField(child=serializers.CharField(), help_text="what GET /models listed")
    missing_models = serializers.ListField(
        child=serializers.CharField(), help_text="configured models the provider did not list"
    )
    error = serializers.CharField()
    status = serializers.IntegerField(
        allow_null=True, help_text="the provider's HTTP status, when it answered"
    )
