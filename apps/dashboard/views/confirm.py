"""The confirm-then-act step every destructive dashboard action goes through, and the enable/disable
switch of the objects that have one."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render, resolve_url

from apps.dashboard.actor import DashboardRequest
from apps.tenants.errors import ServiceError


def confirm_action(
    request: DashboardRequest,
    *,
    title: str,
    body: str,
    action: str,
    back: str,
    perform: Callable[[], str | tuple[str, str]],
) -> HttpResponse:
    """GET shows a confirmation page; POST runs ``perform`` and goes back to ``back`` (a URL name or a
    URL). ``perform`` returns the success message, or the message and the URL to go to instead. A
    refused action (a ``ServiceError``) becomes an error message."""
    if request.method == "POST":
        try:
            done = perform()
        except ServiceError as exc:
            messages.error(request, exc.message)
            return redirect(back)
        message, target = done if isinstance(done, tuple) else (done, back)
        messages.success(request, message)
        return redirect(target)
    return render(
        request,
        "dashboard/confirm.html",
        {"title": title, "body": body, "action": action, "cancel_url": resolve_url(back)},
    )


def set_enabled(
    request: DashboardRequest, *, back: str, label: str, update: Callable[[bool], object]
) -> HttpResponse:
    """POST ``enabled=1`` or ``enabled=0``: ``update(True|False)`` through its service, then back to
    ``back`` with a message naming ``label``; a refusal (a ``ServiceError``) becomes an error message."""
    value = request.POST.get("enabled", "")
    if value not in {"0", "1"}:
        messages.error(request, "Say enabled=1 or enabled=0.")
        return redirect(back)
    try:
        update(value == "1")
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{label} {'enabled' if value == '1' else 'disabled'}.")
    return redirect(back)
