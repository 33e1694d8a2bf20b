"""Members: everyone reads; owners add people, change roles and remove members."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from apps.accounts import services
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import MemberAddForm, MemberRoleForm, add_service_error
from apps.dashboard.views.confirm import confirm_action
from apps.tenants import access, selectors
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def member_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's members and their roles."""
    return render(
        request,
        "dashboard/members/list.html",
        {
            "memberships": selectors.membership_list(tenant=request.actor.tenant),
            "can_manage": request.actor.can(Role.OWNER),
            "roles": Role.choices,
        },
    )


@dashboard_view(Role.OWNER)
def member_add(request: DashboardRequest) -> HttpResponse:
    """Add a person by email; a password is needed only when they have no account yet."""
    form = MemberAddForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            membership = services.membership_create(
                actor=request.actor,
                email=data["email"],
                role=data["role"],
                password=data["password"] or None,
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"{data['email']} is now a {membership.role} of this tenant.")
            return redirect("dashboard:members")
    return render(request, "dashboard/members/form.html", {"form": form})


@dashboard_view(Role.OWNER, methods=("POST",))
def member_role(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Change a member's role (the form sits on the member list)."""
    membership = access.access_membership(actor=request.actor, id=id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the roles.")
        return redirect("dashboard:members")
    try:
        services.membership_update(actor=request.actor, membership=membership, role=form.cleaned_data["role"])
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{membership.user.email} is now {membership.role}.")
    return redirect("dashboard:members")


@dashboard_view(Role.OWNER)
def member_remove(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Ask for confirmation (GET), then remove the member (POST). The last owner cannot be removed."""
    membership = access.access_membership(actor=request.actor, id=id)
    email = membership.user.email

    def perform() -> str:
        services.membership_delete(actor=request.actor, membership=membership)
        return f"{email} was removed from this tenant."

    return confirm_action(
        request,
        title=f"Remove {email}?",
        body="They lose access to this tenant at once. Their account and other tenants stay.",
        action="Remove member",
        back="dashboard:members",
        perform=perform,
    )
