from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.accounts.services import invalid_key_origin_message
from apps.tenants.api.base import StrictSerializer
from apps.tenants.models import Agent, ApiKey, Membership, agent_key_validator
from apps.tenants.roles import Role
from apps.tenants.validators import validate_settings_object


class AgentOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    settings = serializers.SerializerMethodField(
        help_text="The agent's own settings; a secret-bearing key (tools.web_search.api_key) shows only "
        'whether it is set: {"set": true}.'
    )

    class Meta:
        model = Agent
        fields = [
            "id",
            "key",
            "name",
            "description",
            "type",
            "provider",
            "model",
            "settings",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_settings(self, obj: Agent) -> dict[str, Any]:
        from apps.accounts.services import public_settings

        return public_settings(obj)


class AgentCreateInput(StrictSerializer):
    key = serializers.CharField(max_length=64, validators=[agent_key_validator])
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    type = serializers.ChoiceField(choices=Agent.Type.choices, default=Agent.Type.OPEN)
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    settings = serializers.JSONField(required=False, default=dict, validators=[validate_settings_object])


class AgentUpdateInput(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    type = serializers.ChoiceField(choices=Agent.Type.choices, required=False)
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    settings = serializers.JSONField(required=False, validators=[validate_settings_object])


class ApiKeyOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    state = serializers.CharField(read_only=True)
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "role",
            "origin",
            "state",
            "created_by",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]
        read_only_fields = fields

    def get_created_by(self, obj: ApiKey) -> str | None:
        return obj.created_by.email if obj.created_by is not None else None


class ApiKeyCreatedOutput(ApiKeyOutput):
    key = serializers.CharField(read_only=True, help_text="The secret. Shown once; store it now.")

    class Meta(ApiKeyOutput.Meta):
        fields = [*ApiKeyOutput.Meta.fields, "key"]
        read_only_fields = fields


class KeyOriginField(serializers.ChoiceField):
    """An API key's origin: ``user``, ``comm``, ``app`` or ``skill``. ``system`` is refused with its own
    message (it is Toolgate's own; no key can have it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=ApiKey.Origin.choices, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and data not in ApiKey.Origin.values:
            self.fail("invalid_origin", message=invalid_key_origin_message(data))
        return super().to_internal_value(data)

    default_error_messages = {"invalid_origin": "{message}"}


class ApiKeyCreateInput(StrictSerializer):
    name = serializers.CharField(max_length=100)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)
    origin = KeyOriginField(
        default=ApiKey.Origin.USER,
        help_text="The origin of every tool call made with this key (user; comm for a channel "
        "integration, app, skill). A call's context cannot change it.",
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class MembershipOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    email = serializers.EmailField(source="user.email", read_only=True)
    user_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user_id", "email", "role", "created_at", "updated_at"]
        read_only_fields = fields


class MembershipCreateInput(StrictSerializer):
    email = serializers.EmailField(max_length=254)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)
    password = serializers.CharField(
        max_length=200, required=False, write_only=True, style={"input_type": "password"}
    )


class MembershipUpdateInput(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class TenantOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()


class MeOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # DRF collects declared fields by name
    role = serializers.CharField()
    tenant = TenantOutput()
    email = serializers.EmailField(allow_null=True)
    api_key = ApiKeyOutput(allow_null=True)
    tenants = TenantOutput(many=True)


class TenantUpdateInput(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    settings = serializers.DictField(
        required=False,
        help_text="Keys to set; a key set to null is removed. A secret-bearing key "
        "(tools.web_search.api_key) is write-only: a string sets it, null or an empty string clears "
        'it, leaving it out (or sending {"set": true}) keeps it.',
    )


class TenantDetailOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    settings = serializers.DictField()
    runtime = serializers.DictField(
        help_text="The effective runtime settings (defaults overlaid by settings)."
    )
