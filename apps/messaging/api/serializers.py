"""Input and output shapes of the channels API.

Inputs check the JSON shape only (unknown fields and wrong JSON types for strings are refused); every
value is validated by ``apps.messaging.services`` (with ``validation``), which reports each problem by
field. Outputs never carry the secret or a header value: whether a secret is set and its last four
characters, the header names.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.messaging import services
from apps.messaging.models import Channel, OutboundMessage
from apps.tenants.api.base import StrictSerializer
from apps.tenants.api.fields import FlagField, ObjectField, StringListField, StringMapField

TOPICS_HELP = (
    'chat or topic id to the tools a call from there may use, e.g. {"-100123:topic:45": ["web_search", '
    '"group:memory"]}; a topic without an entry uses its chat\'s entry'
)


class ChannelFieldsInput(StrictSerializer):
    name = serializers.CharField(required=False, trim_whitespace=False, max_length=200)
    kind = serializers.CharField(required=False, help_text="webhook or telegram (cannot change)")
    enabled = FlagField(required=False)
    url = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=1000,
        help_text="webhook: where messages are POSTed (https); telegram: the Bot API base URL "
        "(default https://api.telegram.org)",
    )
    secret = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        write_only=True,
        max_length=1000,
        help_text="write-only; webhook: the HMAC-SHA256 signing secret (optional); telegram: the bot "
        "token. Leave out to keep the stored one",
    )
    extra_headers = StringMapField(
        required=False, write_only=True, help_text="write-only; replaces every header"
    )
    default_chat_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    topics = ObjectField(required=False, help_text=TOPICS_HELP)
    agent_keys = StringListField(required=False, help_text="the agents that may send through it; [] = all")


class ChannelCreateInput(ChannelFieldsInput):
    name = serializers.CharField(trim_whitespace=False, max_length=200)
    kind = serializers.CharField(help_text="webhook or telegram")


class ChannelUpdateInput(ChannelFieldsInput):
    pass


class ChannelTestInput(StrictSerializer):
    chat_id = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="default: the channel's default chat"
    )


class ChannelOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    enabled = serializers.BooleanField()
    url = serializers.CharField()
    secret_set = serializers.BooleanField()
    secret_last4 = serializers.CharField(help_text="the secret's last 4 characters (empty for short ones)")
    extra_headers = serializers.ListField(
        child=serializers.CharField(), help_text="header names (values never)"
    )
    default_chat_id = serializers.CharField()
    topics = serializers.DictField(help_text=TOPICS_HELP)
    agent_keys = serializers.ListField(child=serializers.CharField())
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Channel) -> dict[str, Any]:
        data = services.channel_data(instance)
        data.update(
            secret_last4=services.secret_hint(instance.secret),
            created_at=serializers.DateTimeField().to_representation(instance.created_at),
            updated_at=serializers.DateTimeField().to_representation(instance.updated_at),
        )
        return data


class ChannelTestOutput(serializers.Serializer):  # type: ignore[type-arg]
    ok = serializers.BooleanField()
    latency_ms = serializers.IntegerField()
    chat_id = serializers.CharField()
    message_id = serializers.CharField(help_text="the receiver's id of the message, when it gave one")
    error = serializers.CharField()


class OutboundMessageOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    channel = serializers.CharField(source="channel_name")
    agent = serializers.CharField(source="agent_key")

    class Meta:
        model = OutboundMessage
        fields = [
            "id",
            "channel",
            "kind",
            "agent",
            "session_key",
            "user_id",
            "chat_id",
            "text",
            "text_bytes",
            "text_sha256",
            "status",
            "error",
            "provider_message_id",
            "latency_ms",
            "created_at",
        ]
