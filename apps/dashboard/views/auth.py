"""Logging in and out, and choosing the tenant to act in."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from apps.accounts import services
from apps.dashboard.actor import SESSION_TENANT_KEY, resolve_actor, session_user
from apps.dashboard.forms import TenantSwitchForm
from apps.realtime import events
from apps.tenants.selectors import tenants_of_user

logger = logging.getLogger(__name__)


class LoginView(auth_views.LoginView):
    """Django's login form in the dashboard's layout. Logins are audited in the tenant the session
    starts in; failed attempts are logged (never the password)."""

    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_valid(form)
        actor = resolve_actor(self.request, form.get_user())
        if actor is not None:
            services.session_record(actor=actor, verb="auth.login")
        return response

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        logger.warning("dashboard login failed", extra={"username": str(form.data.get("username", ""))[:150]})
        return super().form_invalid(form)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Log out (POST only, so a link or an image on another site cannot log anyone out). Live sockets
    opened with this session are closed too."""
    user = session_user(request)
    actor = resolve_actor(request, user) if user is not None else None
    if actor is not None:
        services.session_record(actor=actor, verb="auth.logout")
    if request.session.session_key:
        events.disconnect(kind="session", ident=request.session.session_key, reason="You logged out.")
    logout(request)
    messages.info(request, "You are logged out.")
    return redirect("dashboard:login")


@require_POST
def switch_tenant(request: HttpRequest) -> HttpResponse:
    """Act in another tenant. Only a tenant the user is an active member of is accepted; anything else
    answers 404 (the same as a tenant that does not exist) and leaves the session as it was."""
    user = session_user(request)
    if user is None:
        return redirect_to_login(request.get_full_path())
    form = TenantSwitchForm(request.POST)
    if not form.is_valid():
        raise Http404("No such tenant.")
    membership = tenants_of_user(user_id=user.pk).filter(tenant_id=form.cleaned_data["tenant_id"]).first()
    if membership is None:
        raise Http404("No such tenant.")
    request.session[SESSION_TENANT_KEY] = str(membership.tenant_id)
    messages.success(request, f"Now working in {membership.tenant.name}.")
    return redirect("dashboard:home")
