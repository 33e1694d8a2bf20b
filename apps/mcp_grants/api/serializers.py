"""Input and output shapes of the MCP API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); every
value is validated by the services (``apps.mcp_grants.services`` with ``validation``), which report
each problem by field. Outputs never carry a secret: headers and env by name, the API key as
``has_api_key``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.mcp_grants import naming, selectors, services
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
)
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import (
    STRING_LIST,
    FlagField,
    ObjectField,
    StringListField,
    StringMapField,
    WholeNumberField,
)


@extend_schema_field({**STRING_LIST, "nullable": True})
class ToolAllowField(serializers.JSONField):
    """Original tool names, or null for every tool of the server (checked by the service)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


def _secret(**kwargs: Any) -> serializers.CharField:
    # Secrets are taken as sent: no trimming, and never shown back.
    return serializers.CharField(trim_whitespace=False, allow_blank=True, write_only=True, **kwargs)


# --- servers -------------------------------------------------------------------------------------------


class ServerFieldsInput(StrictSerializer):
    display_name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    transport = serializers.CharField(required=False, help_text="stdio, sse or streamable-http")
    command = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    args = StringListField(required=False)
    url = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    headers = StringMapField(required=False, write_only=True, help_text="write-only; replaces all headers")
    env = StringMapField(required=False, write_only=True, help_text="write-only; replaces the environment")
    api_key = _secret(required=False, help_text="write-only; an empty string removes it")
    tool_prefix = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="tools are registered as mcp_<tool_prefix>__<tool>; empty: mcp_<server name>__<tool>",
    )
    prefix_tools = FlagField(
        required=False,
        help_text="true (the default): the server's tools are registered with its prefix; false: under "
        "their own names (tool_prefix unused). A name that is a built-in tool's, a custom tool's or "
        "another server's tool's of the tenant is refused: 409 here for tools discovered already, and "
        "left out (listed in tool_conflicts) when discovered later",
    )
    timeout_sec = WholeNumberField(required=False)
    network = FlagField(
        required=False,
        help_text="stdio only: false (the default) runs the server's jail without any network; true lets it "
        "open connections like Toolgate itself (the internet and services on the host's addresses)",
    )
    settings = ObjectField(required=False)
    enabled = FlagField(required=False)


class ServerCreateInput(ServerFieldsInput):
    name = serializers.CharField(trim_whitespace=False)
    transport = serializers.CharField(help_text="stdio, sse or streamable-http")


class ServerUpdateInput(ServerFieldsInput):
    """Any registration field except the name (grants and policies refer to it)."""


class ServerOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    display_name = serializers.CharField()
    transport = serializers.ChoiceField(choices=MCPServer.Transport.choices)
    command = serializers.CharField()
    args = serializers.ListField(child=serializers.CharField())
    url = serializers.CharField()
    headers = serializers.ListField(child=serializers.CharField(), help_text="header names (values never)")
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    has_api_key = serializers.BooleanField()
    tool_prefix = serializers.CharField()
    prefix_tools = serializers.BooleanField(
        help_text="false: the server's tools are registered under their own names"
    )
    registered_prefix = serializers.CharField(
        help_text="tools are registered as <registered_prefix>__<tool>; empty when prefix_tools is false "
        "(registered as <tool>)"
    )
    tool_conflicts = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="discovered tools not registered because their names collide: {tool, reason} each",
    )
    timeout_sec = serializers.IntegerField()
    network = serializers.BooleanField()
    settings = serializers.JSONField()
    enabled = serializers.BooleanField()
    status = serializers.ChoiceField(choices=MCPServer.Status.choices)
    last_health = serializers.JSONField()
    discovery_failures = serializers.IntegerField(
        help_text="failed attempts in a row to discover the server's tools (0 once discovery succeeded)"
    )
    discovery_retry_at = serializers.DateTimeField(
        allow_null=True, help_text="when discovery is tried again (null: no retry pending)"
    )
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: MCPServer) -> dict[str, Any]:
        data = services.server_data(instance)
        retry_at = instance.discovery_retry_at
        data.update(
            last_health=instance.last_health,
            discovery_failures=instance.discovery_failures,
            discovery_retry_at=serializers.DateTimeField().to_representation(retry_at) if retry_at else None,
            created_by=instance.created_by,
            created_at=serializers.DateTimeField().to_representation(instance.created_at),
            updated_at=serializers.DateTimeField().to_representation(instance.updated_at),
        )
        return data


class ServerToolOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField(help_text="the tool's own name on the server")
    registered_name = serializers.CharField(
        help_text="its name for agents: mcp_<prefix>__<tool>, or <tool> for a server with prefix_tools false"
    )
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    discovered_at = serializers.DateTimeField()

    def to_representation(self, instance: MCPServerTool) -> dict[str, Any]:
        server: MCPServer = self.context["server"]
        return {
            "name": instance.name,
            "registered_name": naming.registered_name(server, instance.name),
            "description": instance.description,
            "input_schema": instance.input_schema,
            "discovered_at": serializers.DateTimeField().to_representation(instance.discovered_at),
        }


# --- grants and credentials ----------------------------------------------------------------------------


class GrantInput(StrictSerializer):
    """The whole grant: what is left out takes its default (enabled, every tool, nothing denied, the
    server's resources and prompts included)."""

    enabled = FlagField(required=False)
    tool_allow = ToolAllowField(required=False)
    tool_deny = StringListField(required=False)
    resources = FlagField(required=False, help_text="the server's resources (default true)")
    prompts = FlagField(required=False, help_text="the server's prompts (default true)")
    config_overrides = ObjectField(required=False)


class _GrantOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    server = serializers.CharField()
    enabled = serializers.BooleanField()
    tool_allow = serializers.ListField(child=serializers.CharField(), allow_null=True)
    tool_deny = serializers.ListField(child=serializers.CharField())
    resources = serializers.BooleanField()
    prompts = serializers.BooleanField()
    config_overrides = serializers.JSONField()
    granted_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: AgentGrant | UserGrant) -> dict[str, Any]:
        data = services.grant_data(instance)
        data["created_at"] = serializers.DateTimeField().to_representation(instance.created_at)
        data["updated_at"] = serializers.DateTimeField().to_representation(instance.updated_at)
        return data


class AgentGrantOutput(_GrantOutput):
    """With what the grant gives after the agent's tool policy (a call without a user): pass the
    effects of a list of grants as ``context["effects"]`` (``selectors.grant_effects``) to resolve the
    policy once per agent."""

    agent = serializers.CharField(help_text="the agent's key")
    effective_tools = serializers.ListField(
        child=serializers.CharField(),
        help_text="registered names of the server's tools the grant gives that the policy keeps",
    )
    removed_by_policy = serializers.ListField(
        child=serializers.CharField(),
        help_text="registered names of the server's tools the grant gives that the policy removes",
    )

    def to_representation(self, instance: AgentGrant | UserGrant) -> dict[str, Any]:
        data = super().to_representation(instance)
        effects = self.context.get("effects") or {}
        effect = effects.get(instance.pk)
        if effect is None and isinstance(instance, AgentGrant):
            effect = selectors.grant_effects(tenant=instance.tenant, grants=[instance])[instance.pk]
        data["effective_tools"] = list(effect.effective) if effect else []
        data["removed_by_policy"] = list(effect.removed) if effect else []
        return data


class UserGrantOutput(_GrantOutput):
    user_id = serializers.CharField()


class GrantsOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent_grants = AgentGrantOutput(many=True)
    user_grants = UserGrantOutput(many=True)


class CredentialInput(StrictSerializer):
    """Write-only. A field left out keeps its stored value; an empty value clears it."""

    api_key = _secret(required=False)
    headers = StringMapField(required=False)
    env = StringMapField(required=False, help_text="stdio servers only")


class CredentialOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    server = serializers.CharField()
    user_id = serializers.CharField()
    has_api_key = serializers.BooleanField()
    headers = serializers.ListField(child=serializers.CharField(), help_text="header names (values never)")
    env = serializers.ListField(child=serializers.CharField(), help_text="variable names (values never)")
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: UserCredential) -> dict[str, Any]:
        data = services.credential_data(instance)
        data["updated_at"] = serializers.DateTimeField().to_representation(instance.updated_at)
        return data


# --- access requests ------------------------------------------------------------------------------------


class RequestCreateInput(StrictSerializer):
    server = serializers.CharField(help_text="the server's name")
    scope = serializers.CharField(help_text="agent or user")
    agent = serializers.CharField(required=False, help_text="the agent's key (scope agent)")
    user_id = serializers.CharField(
        required=False,
        trim_whitespace=False,
        help_text="scope user; a logged-in user who leaves it out asks for themselves (their email)",
    )
    tool_allow = ToolAllowField(required=False, default=None)
    reason = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")


class RequestFilterInput(StrictSerializer):
    status = serializers.ChoiceField(choices=AccessRequest.Status.choices, required=False)
    server = serializers.CharField(max_length=64, required=False)
    scope = serializers.ChoiceField(choices=AccessRequest.Scope.choices, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class ApproveInput(StrictSerializer):
    note = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    tool_allow = ToolAllowField(
        required=False,
        default=None,
        help_text="grant fewer tools than were asked for (never others); left out: what was asked",
    )


class RejectInput(StrictSerializer):
    note = serializers.CharField(
        max_length=services.MAX_REASON,
        trim_whitespace=False,
        help_text="why the request is rejected (required): the requester reads it",
    )

    def validate_note(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Write a note saying why the request is rejected.")
        return value.strip()


class RequesterOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    id = serializers.CharField()


class RequestOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    server = serializers.CharField()
    scope = serializers.CharField(help_text="agent or user")
    agent = serializers.CharField(allow_null=True)
    user_id = serializers.CharField()
    tool_allow = serializers.ListField(child=serializers.CharField(), allow_null=True)
    granted_tool_allow = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="what an approval granted: tool_allow or fewer (null: all tools, or not approved)",
    )
    reason = serializers.CharField()
    status = serializers.ChoiceField(choices=AccessRequest.Status.choices)
    requested_by = serializers.CharField()
    requester = RequesterOutput()
    created_at = serializers.DateTimeField()
    reviewed_by = serializers.CharField()
    reviewed_at = serializers.DateTimeField(allow_null=True)
    review_note = serializers.CharField()

    def to_representation(self, instance: AccessRequest) -> dict[str, Any]:
        return services.request_data(instance)
