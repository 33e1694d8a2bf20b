"""The providers API: the model endpoints a tenant's tools and agent runs use.

Administrators read and write providers (their configuration is as sensitive as the keys it holds);
another tenant's provider is 404 whatever the method. Every write goes through ``apps.llm.services``
(audited without secrets, published on the ``llm`` topic).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.llm import selectors, services
from apps.llm.access import access_provider
from apps.llm.api import serializers as s
from apps.llm.models import Provider
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.roles import Role


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class ProviderViewSet(TenantScopedViewSet):
    """Providers of the tenant: OpenAI-compatible endpoints with a ``name`` (lower-case letters, digits,
    ``-`` and ``_``; unique in the tenant), a ``base_url`` (https; checked against the SSRF guard), an
    ``api_key`` and ``extra_headers`` (write-only, encrypted at rest), ``models`` by capability (chat,
    vision, image, speech, transcription, audio, video, document), ``timeout_seconds`` (1-600),
    ``enabled`` and ``is_default`` (one per tenant; the first provider is the default). Invalid fields are
    400 by field, a name in use is 409.

    ``POST …/test`` checks the provider live: ``GET {base_url}/models`` within its timeout, answering
    ``ok``, ``latency_ms`` and the models, or the error."""

    model = Provider
    serializer_class = s.ProviderOutput
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    provider: Provider

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.provider = access_provider(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        return selectors.provider_list(tenant=self.actor.tenant)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ProviderOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.ProviderOutput(self.provider).data)

    @extend_schema(request=s.ProviderCreateInput, responses={201: s.ProviderOutput})
    def create(self, request: Request) -> Response:
        provider = services.provider_create(actor=self.actor, **_body(s.ProviderCreateInput, request))
        provider = access_provider(actor=self.actor, id=provider.pk)
        return Response(s.ProviderOutput(provider).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ProviderUpdateInput, responses={200: s.ProviderOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        services.provider_update(
            actor=self.actor, provider=self.provider, **_body(s.ProviderUpdateInput, request)
        )
        return Response(s.ProviderOutput(access_provider(actor=self.actor, id=pk)).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.provider_delete(actor=self.actor, provider=self.provider)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: s.ProviderTestOutput})
    def test(self, request: Request, pk: str) -> Response:
        return Response(services.provider_test(actor=self.actor, provider=self.provider))
