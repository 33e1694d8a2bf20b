"""Every write to providers, and their live check. Each change is atomic, validated as a whole, audited
(without the API key or header values: whether a key is set, whether it changed, header names) and
published on the tenant's ``llm`` topic after commit. A change that alters which capabilities the tenant
can use raises its configuration version (``config_changed``), so every process sees it at once.

A tenant has at most one default provider: making one the default takes the mark from the other, and
the tenant's first provider becomes the default by itself.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import IntegrityError, transaction

from apps.audit.services import record_and_publish
from apps.llm import selectors, validation
from apps.llm.client import ProviderError, make_client
from apps.llm.errors import LLMErrorCode
from apps.llm.models import DEFAULT_TIMEOUT_SECONDS, Provider, model_field
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError, invalid_fields
from apps.tenants.services import config_changed

TOPIC = "llm"
FIELDS = (
    "name",
    "kind",
    "base_url",
    "api_key",
    "extra_headers",
    "models",
    "timeout_seconds",
    "enabled",
    "is_default",
)
MIN_KEY_FOR_HINT = 12  # the last 4 characters of a shorter key would give away too much of it
MAX_TEST_MODELS = 200
TEST_TIMEOUT_SECONDS = 30.0  # the live check waits at most this long, whatever the provider's timeout


def key_hint(key: str) -> str:
    """The last four characters of a key long enough to show them (else "")."""
    return key[-4:] if len(key) >= MIN_KEY_FOR_HINT else ""


def provider_data(provider: Provider) -> dict[str, Any]:
    """What may be shown, published and audited of a provider: never the key nor a header value."""
    return {
        "id": str(provider.pk),
        "name": provider.name,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "api_key_set": bool(provider.api_key),
        "extra_headers": sorted(provider.extra_headers),
        "models": provider.capability_models,
        "timeout_seconds": provider.timeout_seconds,
        "enabled": provider.enabled,
        "is_default": provider.is_default,
        "created_by": provider.created_by,
    }


def _duplicate(name: str) -> Conflict:
    return Conflict(
        LLMErrorCode.DUPLICATE_NAME,
        f"name: a provider named {name!r} exists already.",
        details={"name": ["in use by another provider of this tenant."]},
    )


def _save(provider: Provider, **kwargs: Any) -> None:
    try:
        with transaction.atomic():
            provider.save(**kwargs)
    except IntegrityError as exc:
        if "llm_provider_one_default" in str(exc):
            raise Conflict(
                ErrorCode.CONFLICT,
                "is_default: another provider became the default at the same time; try again.",
                details={"is_default": ["another provider became the default at the same time."]},
            ) from None
        raise _duplicate(provider.name) from None


def _take_default(actor: Actor, keep: Provider) -> None:
    """Clear the default mark of every other provider of the tenant (before ``keep`` takes it)."""
    others = Provider.objects.for_tenant(actor.tenant).filter(is_default=True).exclude(pk=keep.pk)
    others.update(is_default=False)


def _apply(provider: Provider, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name == "models":
            for capability, model in value.items():
                setattr(provider, model_field(capability), model.strip())
        elif name == "extra_headers":
            provider.extra_headers = dict(value)
        elif name == "base_url":
            provider.base_url = value.rstrip("/")
        else:
            setattr(provider, name, value)


@transaction.atomic
def provider_create(
    *,
    actor: Actor,
    name: str,
    base_url: str,
    kind: str = Provider.Kind.OPENAI_COMPATIBLE,
    api_key: str = "",
    extra_headers: dict[str, str] | None = None,
    models: dict[str, str] | None = None,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    enabled: bool = True,
    is_default: bool = False,
) -> Provider:
    """Add a provider. Invalid fields are 400 by field; a name in use is 409. The tenant's first
    provider becomes its default."""
    values: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "base_url": base_url,
        "api_key": api_key,
        "extra_headers": extra_headers or {},
        "models": models or {},
        "timeout_seconds": timeout_seconds,
        "enabled": enabled,
        "is_default": is_default,
    }
    errors = validation.check_provider(values)
    if errors:
        raise invalid_fields(errors)
    tenant = actor.tenant
    if Provider.objects.for_tenant(tenant).filter(name=name).exists():
        raise _duplicate(name)
    before = selectors.available_capabilities(tenant=tenant)
    if not Provider.objects.for_tenant(tenant).exists():
        values["is_default"] = True
    provider = Provider(tenant=tenant, created_by=actor.label[:255])
    _apply(provider, values)
    if provider.is_default:
        _take_default(actor, provider)
    _save(provider)
    if selectors.available_capabilities(tenant=tenant) != before:
        config_changed(tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="llm.provider.created",
        target_type="llm_provider",
        target_id=str(provider.pk),
        data=provider_data(provider),
    )
    return provider


@transaction.atomic
def provider_update(*, actor: Actor, provider: Provider, **changes: Any) -> Provider:
    """Change any field. ``api_key``: absent keeps the stored key, ``""`` clears it. ``extra_headers``
    replaces every header; ``models`` changes the capabilities it names (``""`` clears one)."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise invalid_fields({sorted(unknown)[0]: ["unknown field."]})
    errors = validation.check_provider(changes)
    if errors:
        raise invalid_fields(errors)
    tenant = actor.tenant
    current = Provider.objects.for_tenant(tenant).select_for_update().filter(pk=provider.pk).first()
    if current is None:
        raise ServiceError(ErrorCode.NOT_FOUND, "No provider with this id.", status=404)
    others = Provider.objects.for_tenant(tenant).exclude(pk=current.pk)
    if "name" in changes and others.filter(name=changes["name"]).exists():
        raise _duplicate(changes["name"])
    before_caps = selectors.available_capabilities(tenant=tenant)
    before = provider_data(current)
    old_key = current.api_key
    old_headers = current.extra_headers
    _apply(current, changes)
    after = provider_data(current)
    key_changed = current.api_key != old_key
    headers_changed = current.extra_headers != old_headers
    changed = sorted(k for k in after if before[k] != after[k])
    if key_changed:
        changed.append("api_key")
    if headers_changed and "extra_headers" not in changed:
        changed.append("extra_headers")
    if not changed:
        return current
    if current.is_default and not before["is_default"]:
        _take_default(actor, current)
    _save(current)
    if selectors.available_capabilities(tenant=tenant) != before_caps:
        config_changed(tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="llm.provider.updated",
        target_type="llm_provider",
        target_id=str(current.pk),
        data={**after, "changed": sorted(changed), "api_key_changed": key_changed},
    )
    return current


@transaction.atomic
def provider_delete(*, actor: Actor, provider: Provider) -> None:
    """Delete a provider. Tools that used it turn to another provider with the capability, or say that
    none is configured."""
    tenant = actor.tenant
    before = selectors.available_capabilities(tenant=tenant)
    data = provider_data(provider)
    Provider.objects.for_tenant(tenant).filter(pk=provider.pk).delete()
    if selectors.available_capabilities(tenant=tenant) != before:
        config_changed(tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="llm.provider.deleted",
        target_type="llm_provider",
        target_id=data["id"],
        data=data,
    )


def provider_test(*, actor: Actor, provider: Provider) -> dict[str, Any]:
    """A live check of ``provider``: ``GET {base_url}/models`` within its timeout (at most 30 s). Answers
    ``ok``, ``latency_ms`` and the ``models`` offered, or the ``error`` (with ``status`` when the
    provider answered). Audited and published like a change (the provider's key was used)."""
    started = time.monotonic()
    result: dict[str, Any] = {"ok": False, "latency_ms": 0, "models": [], "error": "", "status": None}
    listed: list[str] = []
    client = None
    try:
        client = make_client(provider)
        client.timeout = min(client.timeout, TEST_TIMEOUT_SECONDS)
        listed = client.list_models()
    except ProviderError as exc:
        message = client.redact(exc.message) if client is not None else exc.message
        result.update(error=message, status=exc.status)
    else:
        result.update(ok=True, models=sorted(listed)[:MAX_TEST_MODELS])
    result["latency_ms"] = int((time.monotonic() - started) * 1000)
    configured = {c: m for c, m in provider.capability_models.items() if m}
    if result["ok"] and listed:
        result["missing_models"] = sorted({m for m in configured.values() if m not in set(listed)})
    else:
        result["missing_models"] = []
    data = {
        "id": str(provider.pk),
        "name": provider.name,
        "ok": result["ok"],
        "latency_ms": result["latency_ms"],
        "status": result["status"],
        "error": result["error"],
        "models": len(result["models"]),
    }
    with transaction.atomic():
        record_and_publish(
            actor=actor,
            topic=TOPIC,
            verb="llm.provider.tested",
            target_type="llm_provider",
            target_id=str(provider.pk),
            data=data,
        )
    return result
