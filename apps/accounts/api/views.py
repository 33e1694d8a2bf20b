from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import services
from apps.accounts.api import serializers as s
from apps.tenants import access, selectors
from apps.tenants.api.base import TenantScopedViewSet, TenantViewMixin
from apps.tenants.models import Agent, ApiKey, Membership
from apps.tenants.roles import Role
from apps.tenants.setting_secrets import with_status
from apps.toolkit.runtime_settings import effective


class AgentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Agents of the tenant. Viewers read; admins create, change and delete."""

    model = Agent
    serializer_class = s.AgentOutput
    lookup_field = "key"
    lookup_value_regex = "[^/]+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def scope_queryset(self, queryset: Any) -> Any:
        search = self.request.query_params.get("search", "").strip()
        return selectors.agent_list(tenant=self.actor.tenant, search=search[:100] or None)

    @extend_schema(request=s.AgentCreateInput, responses={201: s.AgentOutput})
    def create(self, request: Request) -> Response:
        data = s.AgentCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        agent = services.agent_create(actor=self.actor, **data.validated_data)
        return Response(s.AgentOutput(agent).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.AgentUpdateInput, responses={200: s.AgentOutput})
    def partial_update(self, request: Request, key: str) -> Response:
        agent = access.access_agent(actor=self.actor, key=key)
        data = s.AgentUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        agent = services.agent_update(actor=self.actor, agent=agent, changes=dict(data.validated_data))
        return Response(s.AgentOutput(agent).data)

    def destroy(self, request: Request, key: str) -> Response:
        agent = access.access_agent(actor=self.actor, key=key)
        services.agent_delete(actor=self.actor, agent=agent)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """API keys. Admins see them (never the secret); owners create and revoke. DELETE revokes."""

    model = ApiKey
    serializer_class = s.ApiKeyOutput
    read_role = Role.ADMIN
    write_role = Role.OWNER
    http_method_names = ["get", "post", "delete", "head", "options"]

    def scope_queryset(self, queryset: Any) -> Any:
        return selectors.api_key_list(tenant=self.actor.tenant)

    @extend_schema(request=s.ApiKeyCreateInput, responses={201: s.ApiKeyCreatedOutput})
    def create(self, request: Request) -> Response:
        data = s.ApiKeyCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        key, raw = services.api_key_create(actor=self.actor, **data.validated_data)
        body = dict(s.ApiKeyOutput(key).data)
        body["key"] = raw
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})

    @extend_schema(request=None, responses={200: s.ApiKeyOutput})
    def destroy(self, request: Request, pk: str) -> Response:
        key = access.access_api_key(actor=self.actor, id=pk)
        key = services.api_key_revoke(actor=self.actor, api_key=key)
        return Response(s.ApiKeyOutput(key).data)


class MembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Members of the tenant. Everyone reads; owners add, change roles and remove."""

    model = Membership
    serializer_class = s.MembershipOutput
    write_role = Role.OWNER
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def scope_queryset(self, queryset: Any) -> Any:
        return selectors.membership_list(tenant=self.actor.tenant)

    @extend_schema(request=s.MembershipCreateInput, responses={201: s.MembershipOutput})
    def create(self, request: Request) -> Response:
        data = s.MembershipCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_create(actor=self.actor, **data.validated_data)
        return Response(s.MembershipOutput(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.MembershipUpdateInput, responses={200: s.MembershipOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        membership = access.access_membership(actor=self.actor, id=pk)
        data = s.MembershipUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_update(
            actor=self.actor, membership=membership, role=data.validated_data["role"]
        )
        return Response(s.MembershipOutput(membership).data)

    def destroy(self, request: Request, pk: str) -> Response:
        membership = access.access_membership(actor=self.actor, id=pk)
        services.membership_delete(actor=self.actor, membership=membership)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(TenantViewMixin, APIView):
    """Who the credentials belong to, in which tenant, with which role."""

    @extend_schema(responses={200: s.MeOutput})
    def get(self, request: Request) -> Response:
        actor = self.actor
        tenant = {
            "id": actor.tenant.pk,
            "slug": actor.tenant.slug,
            "name": actor.tenant.name,
            "role": actor.role,
        }
        if actor.kind == "user" and actor.user is not None:
            tenants = [
                {"id": m.tenant.pk, "slug": m.tenant.slug, "name": m.tenant.name, "role": m.role}
                for m in selectors.tenants_of_user(user_id=actor.user.pk)
            ]
        else:
            tenants = [tenant]
        body = {
            "kind": actor.kind,
            "id": actor.id,
            "label": actor.label,
            "role": actor.role,
            "tenant": tenant,
            "email": getattr(actor.user, "email", None) if actor.user is not None else None,
            "api_key": actor.api_key,
            "tenants": tenants,
        }
        return Response(s.MeOutput(body).data)


def _tenant_body(tenant: Any) -> dict[str, Any]:
    # Secret-bearing keys show whether they are set, never their value.
    stored = selectors.setting_secret_paths(tenant=tenant)
    return {
        "id": tenant.pk,
        "slug": tenant.slug,
        "name": tenant.name,
        "status": tenant.status,
        "settings": with_status(tenant.settings, stored),
        "runtime": with_status(effective(tenant.settings, {}), stored),
    }


class TenantView(TenantViewMixin, APIView):
    """The caller's tenant and its settings. Everyone reads; admins change the name and settings."""

    write_role = Role.ADMIN

    @extend_schema(responses={200: s.TenantDetailOutput})
    def get(self, request: Request) -> Response:
        return Response(s.TenantDetailOutput(_tenant_body(self.actor.tenant)).data)

    @extend_schema(request=s.TenantUpdateInput, responses={200: s.TenantDetailOutput})
    def patch(self, request: Request) -> Response:
        data = s.TenantUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = services.tenant_update(actor=self.actor, changes=dict(data.validated_data))
        return Response(s.TenantDetailOutput(_tenant_body(tenant)).data)
