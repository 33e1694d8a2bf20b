"""The platform page: the installation's tenants for platform staff (``is_staff``), with their state and
quotas, to suspend, resume and set quotas (the same services as ``suspend_tenant``, ``resume_tenant``
and ``set_quota``). Deleting a tenant writes an export on the server's disk: it stays a command
(``delete_tenant``), named on the page. To anyone but staff these pages do not exist (404)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render

from apps.runtime import tenant_lifecycle
from apps.runtime.quota_usage import usage
from apps.runtime.tenant_lifecycle import MAX_REASON
from apps.tenants import quotas, selectors
from apps.tenants.errors import ServiceError
from apps.tenants.models import Tenant

View = Callable[..., HttpResponse]


def staff_view(view: View) -> View:
    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD", "POST"):
            return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
        user = request.user
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (user.is_active and user.is_staff):
            raise Http404("No such page.")
        return view(request, *args, **kwargs)

    return wrapped


def _by(request: HttpRequest) -> str:
    user: Any = request.user
    return f"staff:{getattr(user, 'email', '') or user.get_username()}"


def _tenant(slug: str) -> Tenant:
    tenant = selectors.platform_tenant_get(slug=slug)
    if tenant is None:
        raise Http404("No such tenant.")
    return tenant


@staff_view
def tenant_list(request: HttpRequest) -> HttpResponse:
    tenants = list(selectors.platform_tenant_list())
    events = selectors.platform_events_recent(limit=20)
    return render(request, "dashboard/platform/tenants.html", {"tenants": tenants, "events": events})


class SuspendForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REASON,
        required=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Shown to the tenant's members and keys in every refusal.",
    )


@staff_view
def tenant_suspend(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(slug)
    form = SuspendForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            done = tenant_lifecycle.tenant_suspend(
                tenant=tenant, by=_by(request), reason=form.cleaned_data["reason"]
            )
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request,
                f"Suspended {tenant.slug}: {done.runs_cancelled} runs cancelled, {done.containers_removed} "
                f"containers removed, {done.jails_stopped} jails stopped on this host; its commands "
                "elsewhere stop within 2 s, its MCP connections at each process's next health check.",
            )
        return redirect("dashboard:platform_tenants")
    return render(request, "dashboard/platform/suspend.html", {"tenant": tenant, "form": form})


@staff_view
def tenant_resume(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(slug)
    if request.method == "POST":
        try:
            tenant_lifecycle.tenant_resume(tenant=tenant, by=_by(request))
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, f"Resumed {tenant.slug}. Runs cancelled by the suspension stay cancelled."
            )
        return redirect("dashboard:platform_tenants")
    return render(
        request,
        "dashboard/confirm.html",
        {
            "title": f"Resume {tenant.slug}?",
            "body": "Its keys, logins, websockets, schedules and MCP servers work again at once.",
            "action": "Resume",
            "cancel_url": "/platform/tenants/",
        },
    )


class QuotaForm(forms.Form):
    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in quotas.NAMES:
            current = quotas.limit(tenant, name)
            self.fields[name] = forms.IntegerField(
                min_value=0,
                max_value=quotas.MAX_VALUE,
                required=False,
                initial=current.value if current.overridden else None,
                label=name,
                help_text=(
                    f"{quotas.DESCRIPTIONS[name]}; empty: the default ({current.default or 'no limit'}); "
                    "0: no limit"
                ),
            )


@staff_view
def tenant_quota(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant(slug)
    form = QuotaForm(request.POST if request.method == "POST" else None, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        changes = {name: form.cleaned_data[name] for name in quotas.NAMES}
        try:
            tenant_lifecycle.tenant_quota_set(tenant=tenant, by=_by(request), changes=changes)
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Quotas of {tenant.slug} saved; they apply at once.")
            return redirect("dashboard:platform_tenants")
    return render(
        request, "dashboard/platform/quota.html", {"tenant": tenant, "form": form, "rows": usage(tenant)}
    )
