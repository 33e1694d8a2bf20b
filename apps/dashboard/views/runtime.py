"""Runtime settings of the tenant: everyone reads what is in effect; admins change or reset keys.

The page also shows the policy values in effect (profile, scrubbing, rate limit, exec approvals, origin
restrictions, exec deny groups) read-only: the policy editor changes them.

Reading and changing are separate URLs so the role check stays in :func:`dashboard_view`: a viewer's
POST is refused before any view code runs.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.accounts import services
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import RuntimeResetForm, RuntimeSettingsForm, add_service_error
from apps.dashboard.runtime_display import LABELS, policy_rows, setting_rows
from apps.tenants import selectors
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role
from apps.toolkit.runtime_settings import effective


def _form(request: DashboardRequest, data: Any = None) -> RuntimeSettingsForm:
    tenant = request.actor.tenant
    return RuntimeSettingsForm(
        data,
        current=effective(tenant.settings, {}),
        secret_paths=selectors.setting_secret_paths(tenant=tenant),
    )


def _page(request: DashboardRequest, form: RuntimeSettingsForm | None, status: int = 200) -> HttpResponse:
    tenant = request.actor.tenant
    can_edit = request.actor.can(Role.ADMIN)
    if form is None and can_edit:
        form = _form(request)
    return render(
        request,
        "dashboard/runtime/settings.html",
        {
            "rows": setting_rows(tenant.settings, secret_paths=selectors.setting_secret_paths(tenant=tenant)),
            "policy_rows": policy_rows(tenant),
            "form": form,
            "can_edit": can_edit,
        },
        status=status,
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def runtime_settings(request: DashboardRequest) -> HttpResponse:
    """The tenant's effective runtime settings and policy values, each marked default or set; the edit
    form (settings only) for admins."""
    return _page(request, None)


@dashboard_view(Role.ADMIN, methods=("POST",))
def runtime_settings_edit(request: DashboardRequest) -> HttpResponse:
    """Save the keys the form changed through ``tenant_update`` (which validates and audits)."""
    form = _form(request, request.POST)
    if form.is_valid():
        changes = form.changes()
        if not changes:
            messages.info(request, "Nothing changed.")
            return redirect("dashboard:runtime_settings")
        try:
            services.tenant_update(actor=request.actor, changes={"settings": changes})
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            names = ", ".join(LABELS[key].lower() for key in changes)
            messages.success(request, f"Runtime settings saved ({names}).")
            return redirect("dashboard:runtime_settings")
    return _page(request, form)


@dashboard_view(Role.ADMIN, methods=("POST",))
def runtime_settings_reset(request: DashboardRequest) -> HttpResponse:
    """Remove one key from the tenant's settings, so the default applies again."""
    form = RuntimeResetForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown runtime setting.")
        return redirect("dashboard:runtime_settings")
    key = form.cleaned_data["key"]
    if key not in request.actor.tenant.settings:
        messages.info(request, f"{LABELS[key]} already uses its default.")
    else:
        try:
            services.tenant_update(actor=request.actor, changes={"settings": {key: None}})
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"{LABELS[key]} reset to its default.")
    return HttpResponseRedirect(f"{reverse('dashboard:runtime_settings')}#setting-{key}")
