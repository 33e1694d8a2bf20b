"""``/api/v1/tenant/quota``: the tenant's quotas and what it uses of each. Everyone in the tenant reads;
only platform staff (a Django user with ``is_staff``, signed in) change them, never a tenant role or an
API key: a tenant must not raise its own limits."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.runtime import quota_usage
from apps.runtime.tenant_lifecycle import tenant_quota_set
from apps.tenants import quotas
from apps.tenants.api.base import StrictSerializer, TenantViewMixin
from apps.tenants.models import Tenant
from apps.tenants.roles import Role


class QuotaOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.ChoiceField(choices=list(quotas.NAMES))
    limit = serializers.IntegerField(help_text="0: no limit")
    default_limit = serializers.IntegerField(help_text="the installation's default (0: no limit)")
    overridden = serializers.BooleanField(help_text="true: set for this tenant; false: the default")
    used = serializers.IntegerField(help_text="rates: in the last minute; counts: now")
    description = serializers.CharField()


class QuotaTenantOutput(serializers.Serializer):  # type: ignore[type-arg]
    slug = serializers.CharField()
    name = serializers.CharField()


class QuotasOutput(serializers.Serializer):  # type: ignore[type-arg]
    tenant = QuotaTenantOutput()
    quotas = QuotaOutput(many=True)


class QuotasInput(StrictSerializer):
    quotas = serializers.DictField(
        child=serializers.JSONField(allow_null=True),
        help_text='name -> a whole number of 0 or more (0: no limit), or null / "default" for the default',
    )


def _body(tenant: Tenant) -> Any:
    rows = [u.as_dict() for u in quota_usage.usage(tenant)]
    return QuotasOutput({"tenant": {"slug": tenant.slug, "name": tenant.name}, "quotas": rows}).data


class TenantQuotaView(TenantViewMixin, APIView):
    read_role = Role.VIEWER
    write_role = Role.VIEWER  # the staff check below is what allows a change

    @extend_schema(responses={200: QuotasOutput})
    def get(self, request: Request) -> Response:
        return Response(_body(self.actor.tenant))

    @extend_schema(request=QuotasInput, responses={200: QuotasOutput})
    def patch(self, request: Request) -> Response:
        user = self.actor.user
        if self.actor.kind != "user" or user is None or not getattr(user, "is_staff", False):
            raise exceptions.PermissionDenied("Only the platform's staff change a tenant's quotas.")
        data = QuotasInput(data=request.data)
        data.is_valid(raise_exception=True)
        label = getattr(user, "email", "") or user.get_username()
        tenant = tenant_quota_set(
            tenant=self.actor.tenant, by=f"staff:{label}", changes=data.validated_data["quotas"]
        )
        return Response(_body(tenant))
