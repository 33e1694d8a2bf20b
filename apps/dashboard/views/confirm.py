"""The confirm-then-act step every destructive dashboard action goes through."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from apps.dashboard.actor import DashboardRequest
from apps.tenants.errors import ServiceError


def confirm_action(
    request: DashboardRequest,
    *,
    title: str,
    body: str,
    action: str,
    back: str,
    perform: Callable[[], str],
) -> HttpResponse:
    """GET shows a confirmation page; POST runs ``perform`` (which returns the success message) and goes
    back to the ``back`` URL name. A refused action (a ``ServiceError``) becomes an error message."""
    if request.method == "POST":
        try:
            done = perform()
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, done)
        return redirect(back)
    return render(
        request,
        "dashboard/confirm.html",
        {"title": title, "body": body, "action": action, "cancel_url_name": back},
    )
