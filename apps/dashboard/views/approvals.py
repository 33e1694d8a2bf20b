"""The approvals inbox (pending exec approvals arrive live), decisions, and the allow-always rules."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.views.confirm import confirm_action
from apps.policy import approval_services
from apps.policy.access import access_approval, access_rule
from apps.policy.approval_models import ApprovalDecision, ApprovalStatus
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role

RECENT = 20  # resolved approvals shown under the pending ones
MAX_PENDING = 200


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def approval_inbox(request: DashboardRequest) -> HttpResponse:
    """Pending approvals, oldest first (the next to expire on top), then the latest resolved ones. New
    ones are added live (static/js/approvals-live.js)."""
    tenant = request.actor.tenant
    pending = list(
        approval_services.approval_list(tenant=tenant, status=ApprovalStatus.PENDING).order_by("created_at")[
            :MAX_PENDING
        ]
    )
    recent = list(
        approval_services.approval_list(tenant=tenant).exclude(
            approval_services.current_status_is(ApprovalStatus.PENDING)
        )[:RECENT]
    )
    for approval in recent:  # shown as it reads now: one expired but not yet marked is "Timed out"
        approval.status = approval_services.current_status(approval)
    return render(
        request,
        "dashboard/approvals/inbox.html",
        {
            "pending": pending,
            "recent": recent,
            "live": True,
            "live_config": {
                "server_now": approval_services.database_now().isoformat(),
                "decide_url": reverse(
                    "dashboard:approval_decide", args=["00000000-0000-0000-0000-000000000000"]
                ),
                "deny_url": reverse("dashboard:approval_deny", args=["00000000-0000-0000-0000-000000000000"]),
            },
        },
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def approval_decide(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Allow once or allow always (POST from the inbox). Denying goes through :func:`approval_deny`."""
    approval = access_approval(actor=request.actor, id=id)
    decision = request.POST.get("decision", "")
    reason = request.POST.get("reason", "").strip()
    if decision not in {ApprovalDecision.ALLOW_ONCE, ApprovalDecision.ALLOW_ALWAYS}:
        messages.error(request, "Choose allow once or allow always; deny asks for a confirmation.")
        return redirect("dashboard:approvals")
    try:
        approval_services.approval_decide(
            actor=request.actor, approval=approval, decision=decision, reason=reason
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        label = "allowed once" if decision == ApprovalDecision.ALLOW_ONCE else "allowed always (rule stored)"
        messages.success(request, f"“{approval.command[:80]}” {label}.")
    return redirect("dashboard:approvals")


@dashboard_view(Role.ADMIN)
def approval_deny(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Ask for confirmation and a reason (GET), then deny (POST); the waiting call is refused."""
    approval = access_approval(actor=request.actor, id=id)
    if request.method != "POST" and approval_services.current_status(approval) != ApprovalStatus.PENDING:
        messages.error(request, approval_services.resolved_error(approval).message)
        return redirect("dashboard:approvals")
    reason = request.POST.get("reason", "").strip() if request.method == "POST" else ""
    if request.method == "POST" and len(reason) > approval_services.MAX_REASON_CHARS:
        messages.error(
            request, f"The reason may have at most {approval_services.MAX_REASON_CHARS} characters."
        )
        return redirect("dashboard:approval_deny", id=approval.pk)
    if request.method == "POST":
        try:
            approval_services.approval_decide(
                actor=request.actor, approval=approval, decision=ApprovalDecision.DENY, reason=reason
            )
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"“{approval.command[:80]}” denied.")
        return redirect("dashboard:approvals")
    return render(
        request,
        "dashboard/approvals/deny.html",
        {"approval": approval, "max_reason": approval_services.MAX_REASON_CHARS},
    )


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def approval_count(request: DashboardRequest) -> HttpResponse:
    """The pending count the navigation badge shows (refreshed on every approvals event)."""
    return JsonResponse({"pending": approval_services.pending_count(tenant=request.actor.tenant)})


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def rule_list(request: DashboardRequest) -> HttpResponse:
    """allow-always rules: active first, then revoked ones."""
    rules = approval_services.rule_list(tenant=request.actor.tenant).order_by("revoked_at", "-created_at")
    return render(request, "dashboard/approvals/rules.html", {"rules": rules[:500]})


@dashboard_view(Role.ADMIN)
def rule_revoke(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Ask for confirmation (GET), then revoke the rule (POST)."""
    rule = access_rule(actor=request.actor, id=id)

    def perform() -> str:
        approval_services.rule_revoke(actor=request.actor, rule=rule)
        return f"Rule for {rule.shape} revoked: agent {rule.agent.key} asks again for it."

    return confirm_action(
        request,
        title=f"Revoke the allow-always rule of {rule.agent.key}?",
        body=f"Commands of the shape {rule.shape} will need an approval again.",
        action="Revoke rule",
        back="dashboard:approval_rules",
        perform=perform,
    )
