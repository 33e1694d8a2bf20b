"""API keys: admins see them (never a secret); owners create and revoke them."""

from __future__ import annotations

from uuid import UUID

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from apps.accounts import services
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import ApiKeyCreateForm, add_service_error
from apps.dashboard.views.confirm import confirm_action
from apps.tenants import access, selectors
from apps.tenants.errors import ServiceError
from apps.tenants.models import ApiKey
from apps.tenants.roles import Role


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def api_key_list(request: DashboardRequest) -> HttpResponse:
    """Every key of the tenant, newest first, with its state and last use."""
    keys = selectors.api_key_list(tenant=request.actor.tenant)
    return render(
        request,
        "dashboard/api_keys/list.html",
        {"keys": keys, "can_manage": request.actor.can(Role.OWNER)},
    )


# never_cache: the result page carries the raw secret, which no browser or proxy cache may keep.
@never_cache
@dashboard_view(Role.OWNER)
def api_key_create(request: DashboardRequest) -> HttpResponse:
    """Create a key. The raw secret is in the response to the POST and nowhere else: it is not stored,
    not put in the session and not shown again."""
    form = ApiKeyCreateForm(request.POST if request.method == "POST" else None, actor_role=request.actor.role)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            key, raw = services.api_key_create(
                actor=request.actor,
                name=data["name"],
                role=data["role"],
                origin=data["origin"] or ApiKey.Origin.USER,
                expires_at=data["expires_at"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            return render(request, "dashboard/api_keys/created.html", {"key": key, "raw_key": raw})
    return render(request, "dashboard/api_keys/form.html", {"form": form})


@dashboard_view(Role.OWNER)
def api_key_revoke(request: DashboardRequest, id: UUID) -> HttpResponse:
    """Ask for confirmation (GET), then revoke the key (POST)."""
    key = access.access_api_key(actor=request.actor, id=id)

    def perform() -> str:
        services.api_key_revoke(actor=request.actor, api_key=key)
        return f"API key {key.prefix}… ({key.name}) revoked."

    return confirm_action(
        request,
        title=f"Revoke API key “{key.name}”?",
        body=f"Clients using the key {key.prefix}… are refused from now on. This cannot be undone.",
        action="Revoke key",
        back="dashboard:api_keys",
        perform=perform,
    )
