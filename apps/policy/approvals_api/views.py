from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.policy import approval_services
from apps.policy.access import access_approval, access_rule
from apps.policy.approval_models import ApprovalRule, PendingApproval
from apps.policy.approvals_api import serializers as s
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet, TenantViewMixin
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.roles import Role


def _filters(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.query_params.dict())
    data.is_valid(raise_exception=True)
    return {k: v for k, v in data.validated_data.items() if k not in {"cursor", "page_size"}}


class ApprovalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Exec approvals of the tenant, newest first (admins). Filters: ``status``, ``agent`` (its key).

    One approval is also readable by the credentials that asked for it (an agent loop's API key reads
    the status and, for a call that did not wait, the result); everyone else needs the admin role."""

    model = PendingApproval
    serializer_class = s.ApprovalOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    action_roles = {"retrieve": Role.VIEWER}

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        approval = self.get_object()
        actor = self.actor
        own = approval.requested_by_kind == actor.kind and approval.requested_by_id == actor.id
        if not own and not actor.can(Role.ADMIN):
            raise PermissionDenied(f"This action needs the {Role.ADMIN} role; you are {actor.role}.")
        return Response(s.ApprovalOutput(approval).data)

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return approval_services.with_current_status(queryset)
        return approval_services.approval_list(
            tenant=self.actor.tenant, **_filters(s.ApprovalFilterInput, self.request)
        )


class ApprovalDecideView(TenantViewMixin, APIView):
    """Decide a pending approval: allow-once, allow-always (also stores a rule per command shape) or
    deny, with an optional reason. Deciding one that is no longer pending is 409.

    The approval is looked up before the method is: another tenant's is 404 whatever the method."""

    read_role = Role.ADMIN
    write_role = Role.ADMIN
    approval: PendingApproval

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.approval = access_approval(actor=self.actor, id=kwargs["pk"])

    @extend_schema(request=s.DecideInput, responses={200: s.ApprovalOutput})
    def post(self, request: Request, pk: str) -> Response:
        data = s.DecideInput(data=request.data)
        data.is_valid(raise_exception=True)
        approval = approval_services.approval_decide(
            actor=self.actor,
            approval=self.approval,
            decision=data.validated_data["decision"],
            reason=data.validated_data["reason"],
        )
        return Response(s.ApprovalOutput(approval).data)


class ApprovalRuleViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """allow-always rules (admins). Filters: ``agent``, ``active``. DELETE revokes a rule (the row stays,
    with who revoked it)."""

    model = ApprovalRule
    serializer_class = s.ApprovalRuleOutput
    pagination_class = CreatedCursorPagination
    read_role = Role.ADMIN
    write_role = Role.ADMIN

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.select_related("agent")
        return approval_services.rule_list(
            tenant=self.actor.tenant, **_filters(s.ApprovalRuleFilterInput, self.request)
        )

    @extend_schema(request=None, responses={200: s.ApprovalRuleOutput})
    def destroy(self, request: Request, pk: str) -> Response:
        rule = access_rule(actor=self.actor, id=pk)
        rule = approval_services.rule_revoke(actor=self.actor, rule=rule)
        return Response(s.ApprovalRuleOutput(rule).data)
