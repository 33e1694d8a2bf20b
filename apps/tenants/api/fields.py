"""JSON input fields the apps' API serializers share: each takes the JSON value as sent (nothing
coerced) and tells the OpenAPI schema its shape; the app's services check the value and report each
problem by field."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}


@extend_schema_field(OpenApiTypes.BOOL)
class FlagField(serializers.JSONField):
    """true or false, nothing coerced (checked by the service)."""


@extend_schema_field(OpenApiTypes.INT)
class WholeNumberField(serializers.JSONField):
    """A JSON integer, nothing coerced (checked by the service)."""


@extend_schema_field(STRING_LIST)
class StringListField(serializers.JSONField):
    """A list of strings (checked by the service)."""


@extend_schema_field(STRING_MAP)
class StringMapField(serializers.JSONField):
    """Names to string values: headers or environment variables (checked by the service)."""


@extend_schema_field(OpenApiTypes.OBJECT)
class ObjectField(serializers.JSONField):
    """A JSON object (checked by the service)."""
