"""The save step of the dashboard's add and edit pages: a valid form goes to its service, a refusal is
shown on the form with nothing saved, a success is a message and a redirect."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect

from apps.dashboard.actor import DashboardRequest
from apps.dashboard.forms import add_service_error
from apps.tenants.errors import ServiceError

FormT = TypeVar("FormT", bound=forms.Form)


def submit_form(
    request: DashboardRequest,
    form: FormT,
    *,
    save: Callable[[], str],
    back: str,
    place_error: Callable[[FormT, ServiceError], None] = add_service_error,
) -> HttpResponse | None:
    """On a POST with a valid ``form``: ``save()`` calls the service and returns the success message,
    then the page redirects to ``back`` (a URL name or a URL). None when the page shows the form again:
    a GET, an invalid form, or a refusal (a ``ServiceError``, put on the form by ``place_error``)."""
    if request.method != "POST" or not form.is_valid():
        return None
    try:
        message = save()
    except ServiceError as exc:
        place_error(form, exc)
        return None
    messages.success(request, message)
    return redirect(back)
