"""The approvals inbox (pending exec approvals arrive live, count down to their expiry and leave the list
when it passes), decisions, and the allow-always rules.

An expired approval is never decided: a decision posted after its expiry is answered with when it
expired and that its call was refused. "Allow always" stores a permanent rule, so it first shows the
exact rules it will create (shape, binary, agent, who) and acts only once that page is confirmed.
"""

from __future__ import annotations

from datetime import UTC
from uuid import UUID

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.templatetags.when import when
from apps.dashboard.views.confirm import confirm_action
from apps.policy import approval_services
from apps.policy.access import access_approval, access_rule
from apps.policy.approval_models import ApprovalDecision, ApprovalStatus, PendingApproval
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.roles import Role

RECENT = 20  # resolved approvals shown under the pending ones
MAX_PENDING = 200


def _refusal(approval: PendingApproval, exc: ServiceError) -> str:
    """What the page says when ``approval`` could not be decided: for one that expired, when it
    expired (a ``<time>`` as every timestamp of the pages: local time, UTC on hover) and that its call
    was refused; the service's words else."""
    if exc.code != ErrorCode.APPROVAL_EXPIRED:
        return exc.message
    expired = approval.expires_at.astimezone(UTC)
    return format_html(
        "This approval of “{}” expired at {} before a decision, so it was refused: its call was refused "
        "and nothing ran. The agent may ask again.",
        approval.command[:80],
        when(expired),
    )


def _still_pending(request: DashboardRequest, approval: PendingApproval) -> bool:
    """False (with the reason as a message) for an approval no longer pending (expired or resolved)."""
    if approval_services.current_status(approval) == ApprovalStatus.PENDING:
        return True
    messages.error(request, _refusal(approval, approval_services.resolved_error(approval)))
    return False


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
                "always_url": reverse(
                    "dashboard:approval_allow_always", args=["00000000-0000-0000-0000-000000000000"]
                ),
            },
        },
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def approval_decide(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Allow once, or allow always once its rules were shown (:func:`approval_allow_always` posts here
    after its confirmation). Denying goes through :func:`approval_deny`."""
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
        messages.error(request, _refusal(approval, exc))
    else:
        label = "allowed once" if decision == ApprovalDecision.ALLOW_ONCE else "allowed always (rule stored)"
        messages.success(request, f"“{approval.command[:80]}” {label}.")
    return redirect("dashboard:approvals")


@dashboard_view(Role.ADMIN)
def approval_deny(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Ask for confirmation and a reason (GET), then deny (POST); the waiting call is refused."""
    approval = access_approval(actor=request.actor, id=id)
    if request.method != "POST" and not _still_pending(request, approval):
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
            messages.error(request, _refusal(approval, exc))
        else:
            messages.success(request, f"“{approval.command[:80]}” denied.")
        return redirect("dashboard:approvals")
    return render(
        request,
        "dashboard/approvals/deny.html",
        {"approval": approval, "max_reason": approval_services.MAX_REASON_CHARS},
    )


def rule_preview(request: DashboardRequest, approval: PendingApproval) -> list[dict[str, object]]:
    """The allow-always rules deciding ``approval`` would store, one per command with a resolved binary
    (as :func:`approval_services.approval_decide` stores them): its shape, binary, the command it
    was approved for, and whether an active rule of the agent has it already (it is reused then).
    A command whose binary could not be resolved gets no rule: it is allowed this once only."""
    active = {
        (rule.binary_path, rule.shape)
        for rule in approval_services.rule_list(
            tenant=request.actor.tenant, agent=approval.agent_key, active=True
        )[:1000]
    }
    preview: list[dict[str, object]] = []
    seen: set[tuple[str, str]] = set()
    for item in approval.shapes if isinstance(approval.shapes, list) else []:
        if not isinstance(item, dict):
            continue
        path, shape = str(item.get("binary_path") or ""), str(item.get("shape") or "")
        command = str(item.get("command", ""))[:2000]
        if path and shape and (path, shape) in seen:
            continue
        seen.add((path, shape))
        preview.append(
            {
                "shape": shape,
                "binary_path": path,
                "command": command,
                "stored": bool(path and shape),
                "exists": (path, shape) in active,
            }
        )
    return preview


@dashboard_view(Role.ADMIN)
def approval_allow_always(request: DashboardRequest, id: UUID) -> HttpResponse:
    """The confirmation step of "Allow always": the exact rules it stores (pattern, binary, the agent
    they apply to, who creates them), with the reason carried over from the inbox. The inbox's button
    posts here and only shows this page; its "Create the rule and allow" button decides."""
    approval = access_approval(actor=request.actor, id=id)
    if not _still_pending(request, approval):
        return redirect("dashboard:approvals")
    reason = request.POST.get("reason", "").strip()[: approval_services.MAX_REASON_CHARS]
    preview = rule_preview(request, approval)
    return render(
        request,
        "dashboard/approvals/allow_always.html",
        {
            "approval": approval,
            "rules": preview,
            "new_rules": [rule for rule in preview if rule["stored"] and not rule["exists"]],
            "unstored": [rule for rule in preview if not rule["stored"]],
            "reason": reason,
            "max_reason": approval_services.MAX_REASON_CHARS,
            "server_now": approval_services.database_now().isoformat(),
        },
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
