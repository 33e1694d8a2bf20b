"""The embedding-settings API: GET and PUT /api/v1/memory/embedding-settings (administrators).

PUT replaces the settings: ``{"kind": "none" | "local" | "openai"}``, and for ``openai`` also
``base_url``, ``model``, ``dimensions`` (null: the model's own size) and ``api_key`` (write-only: leave
it out to keep the stored key, ``""`` to clear it). The answer never holds the key, only
``api_key_set``. The services are in :mod:`apps.memory.embedding_services`.
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.memory import embedding_services as services
from apps.memory.embeddings import LOCAL_DIMENSIONS, LOCAL_MODEL, MAX_DIMENSIONS
from apps.tenants.api.base import StrictSerializer, TenantViewMixin
from apps.tenants.roles import Role


class EmbeddingSettingsInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=services.KINDS)
    base_url = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_BASE_URL, trim_whitespace=False
    )
    model = serializers.CharField(required=False, allow_blank=True, max_length=services.MAX_MODEL)
    dimensions = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_DIMENSIONS
    )
    api_key = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_API_KEY,
        trim_whitespace=False,
        write_only=True,
        help_text="write-only; leave out to keep the stored key, empty to clear it",
    )


class EmbeddingSettingsOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    base_url = serializers.CharField()
    model = serializers.CharField()
    dimensions = serializers.IntegerField(allow_null=True)
    api_key_set = serializers.BooleanField()
    embedder = serializers.CharField(help_text="the model name search and indexing use; empty for none")
    local_model = serializers.DictField(help_text="the model kind local uses")


def _output(view: services.SettingsView) -> dict[str, Any]:
    data = view.as_dict()
    data["local_model"] = {"name": LOCAL_MODEL, "dimensions": LOCAL_DIMENSIONS}
    return dict(EmbeddingSettingsOutput(data).data)


class EmbeddingSettingsView(TenantViewMixin, APIView):
    """The tenant's embedding settings: how memory is embedded for search."""

    read_role = Role.ADMIN
    write_role = Role.ADMIN

    @extend_schema(responses={200: EmbeddingSettingsOutput})
    def get(self, request: Request) -> Response:
        return Response(_output(services.embedding_settings_get(tenant=self.actor.tenant)))

    @extend_schema(request=EmbeddingSettingsInput, responses={200: EmbeddingSettingsOutput})
    def put(self, request: Request) -> Response:
        data = EmbeddingSettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        view = services.embedding_settings_update(actor=self.actor, values=dict(data.validated_data))
        return Response(_output(view))


urlpatterns: list[URLPattern] = [
    path("memory/embedding-settings", EmbeddingSettingsView.as_view(), name="memory-embedding-settings"),
]
