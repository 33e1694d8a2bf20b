"""The scope of a call as query parameters, shared by the views that take one (the tools listing and
Toolgate's MCP endpoint in the gateway, the policy explanation in the policy app): the serializer and
its OpenAPI parameters."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from apps.tenants.api.base import StrictSerializer


class CallScopeQueryInput(StrictSerializer):
    """The call a tool listing or a policy explanation is for, as query parameters. Each may only
    narrow the tools, as in :class:`CallContextInput` (internal channels are refused in a listing)."""

    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    user_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    channel = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    subagent_depth = serializers.IntegerField(min_value=0, max_value=5, required=False, default=0)
    tool_allow = serializers.CharField(
        max_length=10000,
        required=False,
        allow_blank=True,
        default=None,
        help_text="Comma-separated names, group: references or * patterns; a final intersection. "
        "Given but empty (`tool_allow=`), it allows nothing, as an empty list in a call's context does.",
    )

    @staticmethod
    def tool_allow_names(raw: str | None) -> tuple[str, ...] | None:
        """The request's allow list from the comma-separated parameter: None when not given (no
        narrowing), empty when given empty (nothing allowed: an empty list never widens)."""
        return tuple(n.strip() for n in raw.split(",") if n.strip()) if raw is not None else None


# The query parameters of :class:`CallScopeQueryInput`, for the schema of the views that read them.
CALL_SCOPE_PARAMETERS = [
    OpenApiParameter("provider", OpenApiTypes.STR),
    OpenApiParameter("user_id", OpenApiTypes.STR),
    OpenApiParameter("channel", OpenApiTypes.STR),
    OpenApiParameter("chat_id", OpenApiTypes.STR),
    OpenApiParameter("subagent_depth", OpenApiTypes.INT),
    OpenApiParameter("tool_allow", OpenApiTypes.STR, description="comma-separated, a final intersection"),
]
