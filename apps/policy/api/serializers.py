"""Input and output shapes of the policy API."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.policy.models import PolicyVersion, Scope
from apps.tenants.api.base import StrictSerializer
from apps.toolkit.call_scope import CallScopeQueryInput


@extend_schema_field(OpenApiTypes.OBJECT)
class DocumentField(serializers.JSONField):
    """A policy document: any JSON here; its content is checked by ``apps.policy.documents.check``."""


# --- documents -------------------------------------------------------------------------------------


class PolicySaveInput(StrictSerializer):
    document = DocumentField()
    note = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ChannelQueryInput(StrictSerializer):
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class PolicyOutput(serializers.Serializer):  # type: ignore[type-arg]
    scope = serializers.ChoiceField(choices=Scope.choices)
    agent = serializers.CharField(allow_null=True, help_text="the agent's key (agent scope)")
    channel = serializers.CharField(allow_null=True)
    chat_id = serializers.CharField(allow_null=True)
    document = DocumentField()
    version = serializers.IntegerField(help_text="the number of the current version; 0 when there is none")
    updated_at = serializers.DateTimeField(allow_null=True)


class PolicySavedOutput(PolicyOutput):
    changed = serializers.BooleanField(help_text="false when the document equalled the current one")
    warnings = serializers.ListField(child=serializers.CharField())


class ChannelPolicyOutput(serializers.Serializer):  # type: ignore[type-arg]
    channel = serializers.CharField()
    chat_id = serializers.CharField()
    document = DocumentField()
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


# --- versions --------------------------------------------------------------------------------------


class AuthorOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


class PolicyVersionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.SerializerMethodField()
    channel = serializers.SerializerMethodField()
    chat_id = serializers.SerializerMethodField()
    document = DocumentField(allow_null=True, help_text="null when this version deleted the policy")
    diff = DocumentField()
    author = serializers.SerializerMethodField()

    class Meta:
        model = PolicyVersion
        fields = [
            "id",
            "scope",
            "agent",
            "channel",
            "chat_id",
            "number",
            "document",
            "diff",
            "note",
            "author",
            "created_at",
        ]
        read_only_fields = fields

    def get_agent(self, obj: PolicyVersion) -> str | None:
        return obj.agent_key or None

    def get_channel(self, obj: PolicyVersion) -> str | None:
        return obj.channel or None

    def get_chat_id(self, obj: PolicyVersion) -> str | None:
        return obj.chat_id if obj.scope == Scope.CHANNEL else None

    @extend_schema_field(AuthorOutput)
    def get_author(self, obj: PolicyVersion) -> dict[str, str]:
        return {"kind": obj.author_kind, "id": obj.author_id, "label": obj.author_label}


class VersionFilterInput(StrictSerializer):
    scope = serializers.ChoiceField(choices=Scope.choices, required=False)
    agent = serializers.CharField(max_length=64, required=False)
    channel = serializers.CharField(max_length=100, required=False)
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class RollbackPreviewOutput(serializers.Serializer):  # type: ignore[type-arg]
    version = PolicyVersionOutput()
    current = DocumentField(allow_null=True, help_text="the scope's document now; null when it has none")
    current_version = serializers.IntegerField()
    diff = DocumentField(help_text="what a rollback would change, from the current document")
    changed = serializers.BooleanField(help_text="false when the current document already equals it")
    restorable = serializers.BooleanField()
    reason = serializers.CharField(help_text="why it cannot be restored (empty when it can)")


# --- explain and preview ---------------------------------------------------------------------------


# What an explanation is for: the same query parameters as the tool listing.
ExplainQueryInput = CallScopeQueryInput


class ContextInput(StrictSerializer):
    provider = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    user_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    channel = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    subagent_depth = serializers.IntegerField(min_value=0, max_value=5, required=False, default=0)
    tool_allow = serializers.ListField(
        child=serializers.CharField(max_length=200),
        max_length=500,
        required=False,
        allow_null=True,
        default=None,
    )


class ContextOutput(serializers.Serializer):  # type: ignore[type-arg]
    provider = serializers.CharField()
    user_id = serializers.CharField()
    channel = serializers.CharField()
    chat_id = serializers.CharField()
    subagent_depth = serializers.IntegerField()
    tool_allow = serializers.ListField(child=serializers.CharField(), allow_null=True)


class TrailStepOutput(serializers.Serializer):  # type: ignore[type-arg]
    step = serializers.CharField()
    effect = serializers.ChoiceField(choices=["removed", "added"])


class ToolExplanationOutput(serializers.Serializer):  # type: ignore[type-arg]
    tool = serializers.CharField()
    group = serializers.CharField(allow_null=True)
    allowed = serializers.BooleanField()
    decided_by = serializers.CharField(help_text="the last step that changed it, or profile")
    trail = TrailStepOutput(many=True)


class ChannelKeyOutput(serializers.Serializer):  # type: ignore[type-arg]
    channel = serializers.CharField()
    chat_id = serializers.CharField()


class DocumentsOutput(serializers.Serializer):  # type: ignore[type-arg]
    tenant = DocumentField()
    agent = DocumentField()
    channel = DocumentField(allow_null=True)
    channel_key = ChannelKeyOutput(allow_null=True)


class ExplainOutput(serializers.Serializer):  # type: ignore[type-arg]
    agent = serializers.CharField()
    context = ContextOutput()  # type: ignore[assignment]
    allowed = serializers.ListField(child=serializers.CharField())
    tools = ToolExplanationOutput(many=True)
    documents = DocumentsOutput()


class PreviewInput(StrictSerializer):
    scope = serializers.ChoiceField(choices=Scope.choices)
    agent = serializers.CharField(max_length=64, required=False)
    channel = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    chat_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    document = DocumentField()
    explain_agent = serializers.CharField(max_length=64, required=False)
    # DRF collects declared fields by name; this one shadows a Field attribute only for the type checker.
    context = ContextInput(required=False)  # type: ignore[assignment]


class PreviewOutput(serializers.Serializer):  # type: ignore[type-arg]
    valid = serializers.BooleanField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))  # type: ignore[assignment]
    warnings = serializers.ListField(child=serializers.CharField())
    allowed_before = serializers.ListField(child=serializers.CharField())
    allowed_after = serializers.ListField(child=serializers.CharField())
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    tools = ToolExplanationOutput(many=True)


# --- export and import -----------------------------------------------------------------------------


class ImportedOutput(serializers.Serializer):  # type: ignore[type-arg]
    changed = serializers.ListField(child=serializers.CharField(), help_text="scopes that got a version")
    warnings = serializers.ListField(child=serializers.CharField())
