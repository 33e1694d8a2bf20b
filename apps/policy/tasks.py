"""django-q2 jobs of exec approvals. Jobs take ids, re-read through the tenant, and are idempotent."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.policy import approval_services
from apps.policy.approval_models import ApprovalStatus, PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey, Membership, Tenant
from apps.toolkit import gateway

logger = logging.getLogger(__name__)

# The django-q2 Schedule (declared in PolicyConfig.schedules, applied by apps.toolkit.schedules) runs the
# sweep every minute under this name.
EXPIRE_APPROVALS_SCHEDULE = "policy.expire_approvals"


def expire_approvals() -> int:
    """Mark every pending approval past its ``expires_at`` timed out, tenant by tenant."""
    return approval_services.approval_expire_all()


def _requester(tenant: Tenant, actor: dict[str, Any]) -> Actor | None:
    """The actor that asked for the call, if its credentials still hold (a revoked key's call never runs)."""
    kind, ident = actor.get("kind"), str(actor.get("id", ""))
    if kind == "system":
        return Actor.system(tenant)
    if kind == "api_key":
        try:
            key_id = uuid.UUID(ident)
        except ValueError:
            return None
        key = ApiKey.objects.for_tenant(tenant).filter(pk=key_id).first()
        if key is None or not key.is_usable:
            return None
        return Actor(tenant=tenant, role=key.role, kind="api_key", api_key=key)
    if kind == "user" and ident.isdigit():
        membership = Membership.objects.for_tenant(tenant).filter(user_id=int(ident)).first()
        user = get_user_model().objects.filter(pk=int(ident), is_active=True).first()
        if membership is None or user is None:
            return None
        return Actor(tenant=tenant, role=membership.role, kind="user", user=user)
    return None


def _claim(tenant: Tenant, approval_id: uuid.UUID) -> tuple[PendingApproval, dict[str, Any]] | None:
    """Take what is needed to run the call, once: the payload is cleared in the same transaction."""
    with transaction.atomic():
        approval = (
            PendingApproval.objects.for_tenant(tenant)
            .select_for_update()
            .select_related("tenant")
            .filter(pk=approval_id)
            .exclude(status=ApprovalStatus.PENDING)
            .first()
        )
        if approval is None or not approval.call_payload or approval.result is not None:
            return None
        payload = json.loads(approval.call_payload)
        approval.call_payload = ""
        approval.save(update_fields=["call_payload", "updated_at"])
    return approval, payload


def run_approved_call(approval_id: str, tenant_id: str) -> str:
    """Finish a call that did not wait for its approval: run it when allowed, record the refusal
    otherwise, and keep the result on the approval. A second run finds nothing to do."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return "no tenant"
    claimed = _claim(tenant, uuid.UUID(approval_id))
    if claimed is None:
        return "nothing to run"
    approval, payload = claimed
    actor = _requester(tenant, payload.get("actor") or {})
    agent = Agent.objects.for_tenant(tenant).filter(key=payload.get("agent", "")).first()
    if actor is None or agent is None:
        why = "the agent was deleted" if agent is None else "the credentials that asked for it no longer hold"
        approval_services.approval_store_result(
            approval=approval,
            result={"call_id": approval.call_id, "for_llm": f"call not run: {why}", "for_user": "",
                    "is_error": True, "duration_ms": 0.0},
        )  # fmt: skip
        return "not run"
    request = gateway.CallRequest(
        agent=agent,
        tool=str(payload["tool"]),
        args=dict(payload.get("args") or {}),
        session_key=payload.get("session_key", ""),
        user_id=payload.get("user_id", ""),
        channel=payload.get("channel", ""),
        chat_id=payload.get("chat_id", ""),
        peer_kind=payload.get("peer_kind", ""),
        provider=payload.get("provider", ""),
        origin=payload.get("origin"),  # checked again against the actor that asked
        subagent_depth=int(payload.get("subagent_depth", 0)),
        tool_allow=tuple(payload["tool_allow"]) if payload.get("tool_allow") is not None else None,
        style=payload.get("style", "flat"),
        run_id=str(payload.get("run_id") or ""),
    )
    outcome = gateway.call(
        actor=actor,
        request=request,
        decided=gateway.Decided(
            call_id=approval.call_id, status=approval.status, reason=approval.decision_reason
        ),
    )
    assert isinstance(outcome, gateway.CallOutcome)  # a decided call never waits again
    approval_services.approval_store_result(
        approval=approval,
        result={
            "call_id": outcome.call_id,
            "for_llm": outcome.result.for_llm,
            "for_user": outcome.result.for_user,
            "is_error": outcome.result.is_error,
            "duration_ms": outcome.duration_ms,
        },
    )
    return outcome.decision
