"""A tenant's embedding settings: how its memory is embedded (none, the local model, or an
OpenAI-compatible endpoint), read and replaced by administrators.

The API key is write-only: stored encrypted, never returned, logged or audited (only whether one is
set, and whether a change replaced it). The endpoint's base URL passes the SSRF guard's checks when it is
saved (scheme, no user info, no private or metadata address, its name resolved and every address
checked); every request to it is checked again at connect time.

When the embedder changes (another kind, URL, model or size), the tenant's memory documents are indexed
again in one background job, so that search compares the query with vectors of the same model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx
from django.db import transaction

from apps.audit.services import record
from apps.memory import embeddings
from apps.memory.models import EmbeddingSettings, MemoryDocument
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Tenant
from apps.toolkit.ssrf import AddressPolicy, SSRFBlocked

TOPIC = "memory"
KINDS = tuple(EmbeddingSettings.Kind.values)
MAX_BASE_URL = 500
MAX_MODEL = 200
MAX_API_KEY = 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class SettingsView:
    """What the API shows of the settings (never the key)."""

    kind: str
    base_url: str
    model: str
    dimensions: int | None
    api_key_set: bool
    embedder: str  # the name chunks embedded with these settings carry ("" for none)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base_url": self.base_url,
            "model": self.model,
            "dimensions": self.dimensions,
            "api_key_set": self.api_key_set,
            "embedder": self.embedder,
        }


def embedder_name(kind: str, model: str, dimensions: int | None) -> str:
    if kind == EmbeddingSettings.Kind.LOCAL:
        return embeddings.LOCAL_MODEL
    if kind == EmbeddingSettings.Kind.OPENAI:
        return embeddings.openai_embedder_name(model, dimensions)
    return ""


def settings_view(row: EmbeddingSettings | None) -> SettingsView:
    if row is None:
        return SettingsView("none", "", "", None, False, "")
    return SettingsView(
        kind=row.kind,
        base_url=row.base_url,
        model=row.model,
        dimensions=row.dimensions,
        api_key_set=bool(row.api_key),
        embedder=embedder_name(row.kind, row.model, row.dimensions),
    )


def embedding_settings_get(*, tenant: Tenant) -> SettingsView:
    """The tenant's settings as the API shows them (kind ``none`` when never set)."""
    return settings_view(EmbeddingSettings.objects.for_tenant(tenant).first())


def base_url_error(url: str, policy: AddressPolicy | None = None) -> str | None:
    """Why ``url`` cannot be an embeddings endpoint's base URL, or None."""
    if len(url) > MAX_BASE_URL:
        return f"at most {MAX_BASE_URL} characters."
    if any(c.isspace() for c in url) or _CONTROL.search(url):
        return "whitespace and control characters are not allowed."
    policy = policy or AddressPolicy.from_settings()
    try:
        parsed = policy.check_url(url)
        if parsed.query or parsed.fragment:
            return "the base URL takes no query or fragment (e.g. https://api.example.com/v1)."
        policy.resolve(parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    except SSRFBlocked as exc:
        return f"{exc}; the endpoint must be a public http(s) address."
    except httpx.ConnectError:
        return None  # a name that does not resolve yet: every request resolves and checks it again
    return None


def _clean(values: dict[str, Any], current: EmbeddingSettings | None) -> dict[str, Any]:
    """The new field values, or ServiceError with every problem by field."""
    errors: dict[str, list[str]] = {}
    kind = values.get("kind")
    if kind not in KINDS:
        errors["kind"] = [f"one of {', '.join(KINDS)}."]
        raise ServiceError(ErrorCode.INVALID, f"kind: one of {', '.join(KINDS)}.", details=errors)
    base_url = values.get("base_url") or ""
    model = values.get("model") or ""
    dimensions = values.get("dimensions")
    api_key = values.get("api_key")  # None: keep the stored key
    if kind != EmbeddingSettings.Kind.OPENAI:
        for field, value in (("base_url", base_url), ("model", model), ("dimensions", dimensions)):
            if value:
                errors[field] = ["only for kind openai."]
        if api_key:
            errors["api_key"] = ["only for kind openai."]
        cleaned = {"kind": kind, "base_url": "", "model": "", "dimensions": None, "api_key": ""}
    else:
        if not isinstance(base_url, str) or not base_url:
            errors["base_url"] = ["required for kind openai, e.g. https://api.openai.com/v1."]
        elif (message := base_url_error(base_url)) is not None:
            errors["base_url"] = [message]
        if not isinstance(model, str) or not model.strip():
            errors["model"] = ["required for kind openai, e.g. text-embedding-3-small."]
        elif len(model) > MAX_MODEL or _CONTROL.search(model):
            errors["model"] = [f"at most {MAX_MODEL} characters, no control characters."]
        if dimensions is not None and (
            isinstance(dimensions, bool)
            or not isinstance(dimensions, int)
            or not 1 <= dimensions <= embeddings.MAX_DIMENSIONS
        ):
            errors["dimensions"] = [f"null or a whole number from 1 to {embeddings.MAX_DIMENSIONS}."]
        if api_key is not None and (
            not isinstance(api_key, str) or len(api_key) > MAX_API_KEY or _CONTROL.search(api_key)
        ):
            errors["api_key"] = [f"at most {MAX_API_KEY} characters, no line breaks or control characters."]
        kept = (
            current.api_key if current is not None and current.kind == EmbeddingSettings.Kind.OPENAI else ""
        )
        cleaned = {
            "kind": kind,
            "base_url": base_url.rstrip("/") if isinstance(base_url, str) else "",
            "model": model.strip() if isinstance(model, str) else "",
            "dimensions": dimensions,
            "api_key": kept if api_key is None else api_key,
        }
    if errors:
        field, messages = next(iter(errors.items()))
        raise ServiceError(ErrorCode.INVALID, f"{field}: {messages[0]}", details=errors)
    return cleaned


@transaction.atomic
def embedding_settings_update(*, actor: Actor, values: dict[str, Any]) -> SettingsView:
    """Replace the tenant's embedding settings with ``values`` (``kind``, and for ``openai``:
    ``base_url``, ``model``, ``dimensions`` and ``api_key``, where an absent ``api_key`` keeps the stored
    one and ``""`` clears it). Audited and published on the ``memory`` topic; when the embedder changes,
    the tenant's memory is indexed again after commit."""
    tenant = actor.tenant
    current = EmbeddingSettings.objects.for_tenant(tenant).select_for_update().first()
    before = settings_view(current)
    cleaned = _clean(values, current)
    row = current or EmbeddingSettings(tenant=tenant)
    key_changed = (row.api_key or "") != cleaned["api_key"]
    unchanged = current is not None and all(getattr(row, f) == v for f, v in cleaned.items())
    if unchanged or (current is None and cleaned["kind"] == EmbeddingSettings.Kind.NONE):
        return before
    for field, value in cleaned.items():
        setattr(row, field, value)
    row.full_clean(exclude=["tenant"])
    row.save()
    after = settings_view(row)
    reindex = after.embedder != before.embedder
    data = {**after.as_dict(), "api_key_changed": key_changed, "reindex": reindex}
    record(
        actor=actor,
        verb="memory.embedding_settings.updated",
        target_type="embedding_settings",
        target_id=str(row.pk),
        data=data,
    )
    events.publish(tenant=tenant, topic=TOPIC, type="memory.embedding_settings_updated", data=data)
    if reindex:
        schedule_reindex(tenant)
    return after


def schedule_reindex(tenant: Tenant) -> None:
    """Mark the tenant's indexed documents for indexing and queue one job for them, after commit."""
    MemoryDocument.objects.for_tenant(tenant).exclude(index_status=MemoryDocument.IndexStatus.SKIPPED).update(
        index_status=MemoryDocument.IndexStatus.PENDING, indexed_hash=""
    )
    tenant_id = str(tenant.pk)

    def queue() -> None:
        from django_q.tasks import async_task

        async_task("apps.memory.embedding_services.reindex_tenant", tenant_id, group="memory")

    transaction.on_commit(queue)


def reindex_tenant(tenant_id: str) -> int:
    """django-q2 job: index every pending memory document of the tenant again (idempotent: a document
    indexed meanwhile is left alone); how many were indexed."""
    from apps.memory import indexing

    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return 0
    pending = (
        MemoryDocument.objects.for_tenant(tenant)
        .filter(index_status=MemoryDocument.IndexStatus.PENDING)
        .values_list("pk", flat=True)
    )
    done = 0
    for document_id in list(pending):
        if indexing.index_document(tenant=tenant, document_id=str(document_id)) in ("indexed", "failed"):
            done += 1
    return done
