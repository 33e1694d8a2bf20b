"""Reads of providers, always within one tenant (one provider for a request: ``apps.llm.access``).
:func:`resolve` picks the provider and model a capability uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from apps.llm.models import CAPABILITIES, Provider, model_field
from apps.tenants.scoping import TenantQuerySet

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

MAX_NAMES_SHOWN = 20


class ProviderUnavailable(Exception):
    """No provider can serve the capability asked for; the message says what to configure."""


def provider_list(*, tenant: Tenant) -> TenantQuerySet[Provider]:
    """The tenant's providers, the default first, then by name."""
    return Provider.objects.for_tenant(tenant).order_by("-is_default", "name", "id")


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _model(provider: Provider, capability: str) -> str:
    model = provider.model_for(capability)
    if not model and capability == "document":
        model = provider.model_for("chat")  # a document is read by the chat model unless told otherwise
    return model


def resolve(tenant: Tenant, capability: str, provider_name: str | None = None) -> tuple[Provider, str]:
    """The provider and model that serve ``capability`` for ``tenant``.

    With ``provider_name``: that enabled provider, which must have a model for the capability. Without:
    the tenant's default provider when it has one, else the first enabled provider (by name) that does.
    Raises :class:`ProviderUnavailable` with a message saying what to configure."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")
    providers = Provider.objects.for_tenant(tenant)
    what = _article(capability)
    if provider_name:
        chosen = providers.filter(name=provider_name).first()
        if chosen is None:
            names = sorted(providers.filter(enabled=True).values_list("name", flat=True)[:MAX_NAMES_SHOWN])
            known = (
                f"; configured: {', '.join(names)}"
                if names
                else "; none is configured — add one under Providers"
            )
            raise ProviderUnavailable(f"unavailable: no provider named {provider_name[:64]!r}{known}.")
        if not chosen.enabled:
            raise ProviderUnavailable(
                f"unavailable: the provider {chosen.name} is disabled — enable it under Providers or "
                "leave out provider to use the default."
            )
        model = _model(chosen, capability)
        if not model:
            raise ProviderUnavailable(
                f"unavailable: the provider {chosen.name} has no {capability} model — set one under "
                "Providers or leave out provider to use the default."
            )
        return chosen, model
    candidates = providers.filter(enabled=True).order_by("-is_default", "name", "id")
    if capability == "document":
        candidates = candidates.exclude(document_model="", chat_model="")
    else:
        candidates = candidates.exclude(**{model_field(capability): ""})
    found = candidates.first()
    if found is None:
        raise ProviderUnavailable(
            f"unavailable: no provider with {what} model is configured — add one under Providers."
        )
    return found, _model(found, capability)


def available_capabilities(*, tenant: Tenant) -> frozenset[str]:
    """The capabilities some enabled provider of the tenant serves (what decides whether the provider-backed
    tools can run)."""
    rows = Provider.objects.for_tenant(tenant).filter(enabled=True)
    found: set[str] = set()
    for provider in rows:
        found.update(c for c in CAPABILITIES if _model(provider, c))
    return frozenset(found)


def pick(tenant: Tenant, provider_name: str | None = None) -> Provider:
    """The enabled provider named ``provider_name``, else the tenant's default one, else its first
    enabled one (by name), whatever its models; raises :class:`ProviderUnavailable`."""
    providers = Provider.objects.for_tenant(tenant)
    if provider_name:
        chosen = providers.filter(name=provider_name).first()
        if chosen is None or not chosen.enabled:
            names = sorted(providers.filter(enabled=True).values_list("name", flat=True)[:MAX_NAMES_SHOWN])
            known = f"; configured: {', '.join(names)}" if names else ""
            state = "no enabled provider named" if chosen is not None else "no provider named"
            raise ProviderUnavailable(f"unavailable: {state} {provider_name[:64]!r}{known}.")
        return chosen
    found = providers.filter(enabled=True).order_by("-is_default", "name", "id").first()
    if found is None:
        raise ProviderUnavailable("unavailable: no provider is configured — add one under Providers.")
    return found
