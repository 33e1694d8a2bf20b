"""The sandbox API: the engine's state with the tenant's sandbox settings, and the tenant's containers
(with the engine's figures of their resource use), which an administrator may stop.

Administrators and owners only: the containers show sessions and limits, and stopping one interrupts
an agent's work. Another tenant's container is 404 whatever the method. Stopping goes through
``apps.sandbox.services.container_stop`` (audited, published on the ``sandbox`` topic); an
engine that fails to stop it is 503 with the container kept.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.sandbox import manager, selectors, services
from apps.sandbox.access import access_container
from apps.sandbox.api import serializers as s
from apps.sandbox.models import SandboxContainer
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.roles import Role
from apps.toolkit import jail
from apps.toolkit.sandbox_config import allowed_images, host_allowed


def container_data(row: SandboxContainer, *, with_usage: bool = True) -> dict[str, Any]:
    data = manager.describe(row)
    if with_usage:
        data["usage"] = manager.usage(row)
    return data


class SandboxView(TenantViewMixin, APIView):
    """The Docker engine (whether it answers, its version, which allowed images it has), the tenant's
    sandbox settings in effect, and the images an administrator may choose from."""

    read_role = Role.ADMIN
    write_role = Role.ADMIN

    @extend_schema(responses={200: s.SandboxOutput})
    def get(self, request: Request) -> Response:
        return Response(
            {
                "jail": jail.status().as_dict(),
                "host_allowed": host_allowed(),
                "engine": manager.engine_status(),
                "config": selectors.tenant_config(self.actor.tenant).as_dict(),
                "allowed_images": allowed_images(),
            }
        )


class ContainerViewSet(TenantScopedViewSet):
    """The tenant's sandbox containers, the most recently used first, each with its resource use as
    the engine reports it now (``?usage=false`` skips the engine). At most 200 a page.

    ``DELETE`` stops and removes a container: the agent's next command gets a new one."""

    model = SandboxContainer
    serializer_class = s.ContainerOutput
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    row: SandboxContainer

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # One container's routes find it before the method is dispatched: another tenant's is 404 for
        # every method.
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.row = access_container(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        return selectors.container_list(tenant=self.actor.tenant)

    @extend_schema(parameters=[s.ContainerFilterInput])
    def list(self, request: Request) -> Response:
        filters = s.ContainerFilterInput(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        with_usage = filters.validated_data["usage"]
        page = self.paginate_queryset(self.get_queryset())
        rows = page if page is not None else []
        return self.get_paginated_response([container_data(row, with_usage=with_usage) for row in rows])

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(container_data(self.row))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.container_stop(actor=self.actor, row=self.row)
        return Response(status=status.HTTP_204_NO_CONTENT)
