"""Who is using the dashboard: the logged-in user, acting in the tenant chosen in the session.

Every dashboard page is wrapped in :func:`dashboard_view`, which resolves ``request.actor`` once and
refuses the request before the view runs when the user's role in that tenant is too low. A view
therefore never touches data (or changes anything) for a request it would refuse.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, cast

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render

from apps.tenants.actors import Actor
from apps.tenants.authentication import actor_for_session_user, suspended_tenants_of
from apps.tenants.models import Membership
from apps.tenants.roles import Role
from apps.tenants.selectors import tenants_of_user

SESSION_TENANT_KEY = "tenant_id"
READ_ONLY = ("GET", "HEAD")

P = ParamSpec("P")


class DashboardRequest(HttpRequest):
    """The request a dashboard view receives: ``actor`` and ``tenant_memberships`` are always set."""

    actor: Actor
    tenant_memberships: list[Membership]


DashboardView = Callable[Concatenate[DashboardRequest, P], HttpResponse]
PlainView = Callable[Concatenate[HttpRequest, P], HttpResponse]


def session_user(request: HttpRequest) -> AbstractBaseUser | None:
    """The logged-in Django user, or None for anonymous visitors."""
    user = request.user
    if not user.is_authenticated or not isinstance(user, AbstractBaseUser):
        return None
    return user


def resolve_actor(request: HttpRequest, user: AbstractBaseUser) -> Actor | None:
    """The user's actor in the session's tenant (or their first tenant), remembered in the session.

    The tenant is written back to the session so the live-events websocket, which resolves the actor
    from the same session, always acts in the tenant the page shows.
    """
    actor = actor_for_session_user(user, request.session.get(SESSION_TENANT_KEY))
    if actor is not None and request.session.get(SESSION_TENANT_KEY) != str(actor.tenant.pk):
        request.session[SESSION_TENANT_KEY] = str(actor.tenant.pk)
    return actor


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """The dashboard's 403 page."""
    return render(request, "errors/403.html", {"message": message}, status=403)


def dashboard_view(
    role: str = Role.VIEWER, *, methods: tuple[str, ...] = ("GET", "HEAD", "POST")
) -> Callable[[DashboardView[P]], PlainView[P]]:
    """Require a logged-in member of the current tenant with at least ``role``, using one of ``methods``.

    Anonymous visitors are sent to the login page; a user without any active membership gets a page
    saying so; a too-low role gets 403 for every method, so a refused POST never reaches the view.
    """
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r}")

    def decorator(view: DashboardView[P]) -> PlainView[P]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            if request.method not in methods:
                return HttpResponseNotAllowed(methods)
            user = session_user(request)
            if user is None:
                return redirect_to_login(request.get_full_path())
            actor = resolve_actor(request, user)
            if actor is None:
                suspended = list(suspended_tenants_of(user).values())
                return render(request, "dashboard/no_tenant.html", {"suspended": suspended}, status=403)
            dashboard_request = cast(DashboardRequest, request)
            dashboard_request.actor = actor
            dashboard_request.tenant_memberships = list(tenants_of_user(user_id=user.pk))
            if not actor.can(role):
                return forbidden(
                    request,
                    f"This page needs the {role} role in {actor.tenant.name}; your role is {actor.role}.",
                )
            return view(dashboard_request, *args, **kwargs)

        return wrapped

    return decorator
