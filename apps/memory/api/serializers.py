"""Input and output of the memory API."""

from __future__ import annotations

from rest_framework import serializers

from apps.memory.models import MAX_DOCUMENT_CHARS, MAX_PATH_CHARS
from apps.memory.services import MAX_USER_ID_CHARS
from apps.tenants.api.base import StrictSerializer

DOCUMENT_FIELDS = (
    *("id", "path", "user_id", "index_status", "index_error", "indexed_at", "updated_by"),
    *("created_at", "updated_at", "content"),
)


class DocumentOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    path = serializers.CharField()
    user_id = serializers.CharField(
        help_text='The user whose memory it is; "" for the agent\'s global memory.'
    )
    size = serializers.IntegerField(help_text="Bytes of UTF-8.")
    index_status = serializers.CharField(help_text="pending, indexed, failed (see index_error) or skipped.")
    index_error = serializers.CharField()
    indexed_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class DocumentDetailOutput(DocumentOutput):
    content = serializers.CharField()
    chunks = serializers.IntegerField(help_text="Search chunks stored for it.")


class DocumentFilterInput(StrictSerializer):
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS, required=False, allow_blank=True, help_text='"" for global documents.'
    )
    path = serializers.CharField(max_length=MAX_PATH_CHARS, required=False, help_text="A path prefix.")
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class DocumentScopeInput(StrictSerializer):
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS,
        required=False,
        allow_blank=True,
        default="",
        help_text='The user whose document it is; "" (the default) for the agent\'s global memory.',
    )


class DocumentWriteInput(StrictSerializer):
    content = serializers.CharField(
        max_length=MAX_DOCUMENT_CHARS, allow_blank=True, trim_whitespace=False, help_text="The whole text."
    )


class MemorySearchInput(StrictSerializer):
    q = serializers.CharField(max_length=500, help_text="the words or the question to look for")
    scope = serializers.ChoiceField(choices=["user", "global", "all"], required=False, default="all")
    user_id = serializers.CharField(
        max_length=255, required=False, allow_blank=True, default="", help_text="whose memory (with global)"
    )
    limit = serializers.IntegerField(min_value=1, max_value=50, required=False, default=10)
