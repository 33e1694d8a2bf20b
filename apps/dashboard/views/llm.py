"""Providers: the OpenAI-compatible endpoints the media tools, openai_compat_call and agent runs use.
Administrators only (a provider's configuration holds its key): the list, adding and editing one (the key
and the extra headers are write-only: left blank, the stored ones are kept), a live check that lists the
models the provider offers, and deleting one after a confirmation.

Every provider is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.llm.services`` (audited without secrets, published on the ``llm`` topic); a
refusal is shown on the form with nothing saved.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import (
    DashboardForm,
    add_service_error,
    parse_json_object,
    stored_headers_help,
    stored_secret_help,
)
from apps.dashboard.forms_mcp import WriteOnlyTextarea
from apps.dashboard.views.confirm import confirm_action
from apps.dashboard.views.submit import submit_form
from apps.llm import selectors, services
from apps.llm.access import access_provider
from apps.llm.models import CAPABILITIES, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, Provider
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role

MAX_PROVIDERS = 200
PLACEHOLDER = uuid.UUID(int=0)  # a provider's id in URL templates the page's script fills in
MODEL_PREFIX = "model_"
HEADERS_EXAMPLE = '{"OpenAI-Organization": "org-…"}'


class ProviderForm(DashboardForm):
    """A provider's fields. The key and the headers are write-only: blank keeps what is stored."""

    name = forms.CharField(
        max_length=64, help_text="Lower-case letters, digits, '-' and '_'. Agents name it."
    )
    base_url = forms.CharField(
        max_length=500, label="Base URL", help_text="The API root, e.g. https://api.openai.com/v1 (https)."
    )
    api_key = forms.CharField(
        required=False,
        strip=False,
        max_length=1000,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    extra_headers = forms.CharField(
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "class": "mono", "spellcheck": "false"}),
        help_text=f"A JSON object of header names to values, e.g. {HEADERS_EXAMPLE}.",
    )
    timeout_seconds = forms.IntegerField(
        min_value=MIN_TIMEOUT_SECONDS, max_value=MAX_TIMEOUT_SECONDS, initial=60, label="Timeout (seconds)"
    )
    enabled = forms.BooleanField(required=False, initial=True)
    is_default = forms.BooleanField(
        required=False, label="Default provider", help_text="Tools use it unless an agent names another."
    )

    def __init__(self, *args: Any, provider: Provider | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.provider = provider
        for capability, used_for in CAPABILITIES.items():
            self.fields[MODEL_PREFIX + capability] = forms.CharField(
                required=False,
                max_length=200,
                label=f"{capability.capitalize()} model",
                help_text=f"For {used_for}.",
            )
        self.order_fields(
            ["name", "base_url", "api_key", "clear_api_key", "extra_headers"]
            + [MODEL_PREFIX + c for c in CAPABILITIES]
            + ["timeout_seconds", "enabled", "is_default"]
        )
        if provider is None:
            del self.fields["clear_api_key"]
            self.fields["api_key"].help_text = "Write-only: it is never shown again."
        else:
            self.fields["api_key"].help_text = stored_secret_help(
                "key", stored=bool(provider.api_key), hint=services.key_hint(provider.api_key)
            )
            if headers_help := stored_headers_help(provider.extra_headers):
                self.fields["extra_headers"].help_text = headers_help

    def clean_extra_headers(self) -> dict[str, Any] | None:
        text = (self.cleaned_data.get("extra_headers") or "").strip()
        return parse_json_object(text, example=HEADERS_EXAMPLE, max_bytes=None) if text else None

    def values(self) -> dict[str, Any]:
        """The fields as the services take them (the key and headers left out when blank)."""
        data = self.cleaned_data
        values: dict[str, Any] = {
            "name": data["name"],
            "base_url": data["base_url"].strip(),
            "timeout_seconds": data["timeout_seconds"],
            "enabled": bool(data["enabled"]),
            "is_default": bool(data["is_default"]),
            "models": {c: data.get(MODEL_PREFIX + c) or "" for c in CAPABILITIES},
        }
        if data.get("clear_api_key"):
            values["api_key"] = ""
        elif data.get("api_key"):
            values["api_key"] = data["api_key"]
        if data.get("extra_headers") is not None:
            values["extra_headers"] = data["extra_headers"]
        return values

    @staticmethod
    def initial_for(provider: Provider) -> dict[str, Any]:
        initial: dict[str, Any] = {
            "name": provider.name,
            "base_url": provider.base_url,
            "timeout_seconds": provider.timeout_seconds,
            "enabled": provider.enabled,
            "is_default": provider.is_default,
        }
        initial.update({MODEL_PREFIX + c: m for c, m in provider.capability_models.items()})
        return initial


def _provider(request: DashboardRequest, id: uuid.UUID) -> Provider:
    return access_provider(actor=request.actor, id=id)


def _place_error(form: ProviderForm, exc: ServiceError) -> None:
    """The services call the model fields ``models``; the form has one field per capability."""
    if "models" in exc.details:
        for message in exc.details["models"]:
            capability = str(message).split(":", 1)[0]
            field = MODEL_PREFIX + capability if MODEL_PREFIX + capability in form.fields else None
            form.add_error(field, str(message))
        return
    add_service_error(form, exc)


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def provider_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's providers (the default first) with their models, state and key hint; changes made
    elsewhere show live."""
    providers = [
        {
            "provider": p,
            "models": [(c, m) for c, m in p.capability_models.items() if m],
            "key_hint": services.key_hint(p.api_key),
        }
        for p in selectors.provider_list(tenant=request.actor.tenant)[:MAX_PROVIDERS]
    ]
    return render(
        request,
        "dashboard/llm/list.html",
        {
            "providers": providers,
            "live": True,
            "live_config": {
                "topic": services.TOPIC,
                "prefix": "llm.provider.",
                "url": reverse("dashboard:provider_edit", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.ADMIN)
def provider_create(request: DashboardRequest) -> HttpResponse:
    """Add a provider."""
    form = ProviderForm(request.POST if request.method == "POST" else None)

    def save() -> str:
        provider = services.provider_create(actor=request.actor, **form.values())
        return f"Provider {provider.name} added."

    return submit_form(
        request, form, save=save, back="dashboard:providers", place_error=_place_error
    ) or render(request, "dashboard/llm/form.html", {"form": form, "provider": None})


@dashboard_view(Role.ADMIN)
def provider_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a provider; a blank key or header field keeps what is stored."""
    provider = _provider(request, id)
    form = ProviderForm(
        request.POST if request.method == "POST" else None,
        provider=provider,
        initial=ProviderForm.initial_for(provider),
    )

    def save() -> str:
        services.provider_update(actor=request.actor, provider=provider, **form.values())
        return f"Provider {form.cleaned_data['name']} saved."

    return submit_form(
        request, form, save=save, back="dashboard:providers", place_error=_place_error
    ) or render(request, "dashboard/llm/form.html", {"form": form, "provider": provider})


@dashboard_view(Role.ADMIN, methods=("GET", "HEAD", "POST"))
def provider_test(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """GET: the provider and a button; POST: the live check (``GET {base_url}/models``) and its result."""
    provider = _provider(request, id)
    result = (
        services.provider_test(actor=request.actor, provider=provider) if request.method == "POST" else None
    )
    return render(
        request,
        "dashboard/llm/test.html",
        {"provider": provider, "shown": services.provider_data(provider), "result": result},
    )


@dashboard_view(Role.ADMIN)
def provider_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the provider (POST)."""
    provider = _provider(request, id)

    def perform() -> str:
        services.provider_delete(actor=request.actor, provider=provider)
        return f"Provider {provider.name} deleted."

    return confirm_action(
        request,
        title=f"Delete the provider {provider.name}?",
        body="Its key is deleted with it. Tools that used it turn to another provider with the same model "
        "capability, or answer that none is configured. This cannot be undone.",
        action="Delete provider",
        back="dashboard:providers",
        perform=perform,
    )
