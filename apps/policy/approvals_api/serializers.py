from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.policy import approval_services
from apps.policy.approval_models import ApprovalDecision, ApprovalRule, ApprovalStatus, PendingApproval
from apps.tenants.api.base import StrictSerializer


class PrincipalOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    id = serializers.CharField()
    # DRF collects declared fields by name; this one shadows a Field attribute only for the type checker.
    label = serializers.CharField()  # type: ignore[assignment]


class ShapeOutput(serializers.Serializer):  # type: ignore[type-arg]
    command = serializers.CharField()
    binary_path = serializers.CharField(allow_null=True)
    shape = serializers.CharField()
    safe = serializers.BooleanField()


class ApprovalOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A pending (or resolved) approval; ``result`` is the outcome of a call that did not wait."""

    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    agent = serializers.CharField()
    call_id = serializers.CharField()
    tool = serializers.CharField()
    command = serializers.CharField()
    cwd = serializers.CharField()
    shapes = ShapeOutput(many=True)
    reason = serializers.CharField()
    package_install = serializers.BooleanField()
    origin = serializers.CharField()
    session_key = serializers.CharField()
    user_id = serializers.CharField()
    requested_by = PrincipalOutput()
    status = serializers.ChoiceField(choices=ApprovalStatus.choices)
    decision = serializers.CharField()
    decided_by = PrincipalOutput(allow_null=True)
    decision_reason = serializers.CharField()
    wait = serializers.BooleanField()
    result = serializers.JSONField(allow_null=True)

    def to_representation(self, instance: PendingApproval) -> dict[str, Any]:
        return approval_services.approval_data(instance)


class ApprovalRuleOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    agent = serializers.CharField()
    binary_path = serializers.CharField()
    shape = serializers.CharField()
    command = serializers.CharField()
    source_approval = serializers.UUIDField(allow_null=True)
    created_by = PrincipalOutput()
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_by = PrincipalOutput(allow_null=True)

    def to_representation(self, instance: ApprovalRule) -> dict[str, Any]:
        return approval_services.rule_data(instance)


class ApprovalFilterInput(StrictSerializer):
    status = serializers.ChoiceField(choices=ApprovalStatus.choices, required=False)
    agent = serializers.CharField(max_length=64, required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class ApprovalRuleFilterInput(StrictSerializer):
    agent = serializers.CharField(max_length=64, required=False)
    active = serializers.BooleanField(required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class DecideInput(StrictSerializer):
    decision = serializers.ChoiceField(choices=ApprovalDecision.choices)
    reason = serializers.CharField(
        max_length=approval_services.MAX_REASON_CHARS, required=False, allow_blank=True, default=""
    )
