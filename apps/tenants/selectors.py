"""Reads of the tenants app."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef, Q, QuerySet

from apps.tenants.models import Agent, ApiKey, Membership, PlatformEvent, SettingSecret, Tenant
from apps.tenants.scoping import TenantScoped


def tenant_rows(*, model: type[TenantScoped], tenant: Tenant) -> QuerySet[Any]:
    """Every row of the tenant-owned ``model`` in ``tenant`` (the base queryset of the tenant API)."""
    return model.objects.for_tenant(tenant)  # type: ignore[no-any-return]


def no_rows(*, model: type[TenantScoped]) -> QuerySet[Any]:
    """An empty queryset of ``model``, for OpenAPI generation, where there is no request and no tenant."""
    return model.objects.dangerously_all_tenants().none()  # type: ignore[no-any-return]


def agent_list(*, tenant: Tenant, search: str | None = None) -> QuerySet[Agent]:
    qs = with_secret_paths(Agent.objects.for_tenant(tenant))
    if search:
        qs = qs.filter(Q(key__icontains=search) | Q(name__icontains=search))
    return qs.order_by("key")


def api_key_list(*, tenant: Tenant, include_revoked: bool = True) -> QuerySet[ApiKey]:
    qs = ApiKey.objects.for_tenant(tenant).select_related("created_by")
    if not include_revoked:
        qs = qs.filter(revoked_at__isnull=True)
    return qs.order_by("-created_at", "id")


def membership_list(*, tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.for_tenant(tenant).select_related("user").order_by("created_at", "id")


def tenants_of_user(*, user_id: int) -> QuerySet[Membership]:
    """A user's memberships across tenants (the dashboard's tenant switcher)."""
    return (
        Membership.objects.dangerously_all_tenants()
        .select_related("tenant")
        .filter(user_id=user_id, tenant__status=Tenant.Status.ACTIVE)
        .order_by("tenant__slug")
    )


# --- secret-bearing settings ------------------------------------------------------------------------


def with_secret_paths(agents: QuerySet[Agent]) -> QuerySet[Agent]:
    """``agents`` annotated with ``secret_paths``, the paths of their own stored setting secrets (no
    values), so a list shows each agent's "set"/"not set" without a query per agent."""
    paths = SettingSecret.objects.filter(tenant_id=OuterRef("tenant_id"), agent_id=OuterRef("pk")).values(
        "path"
    )
    return agents.annotate(secret_paths=ArraySubquery(paths))


def setting_secret_paths(*, tenant: Tenant) -> frozenset[str]:
    """The paths of the setting secrets stored for ``tenant`` itself (not for its agents)."""
    rows = SettingSecret.objects.for_tenant(tenant).filter(agent__isnull=True)
    return frozenset(rows.values_list("path", flat=True))


def agent_secret_paths(*, agent: Agent) -> frozenset[str]:
    """The paths of the setting secrets stored for ``agent`` (from ``with_secret_paths`` when the agent
    was read with it)."""
    if hasattr(agent, "secret_paths"):
        return frozenset(agent.secret_paths or ())
    rows = SettingSecret.objects.filter(tenant_id=agent.tenant_id, agent=agent)
    return frozenset(rows.values_list("path", flat=True))


def setting_secret_values(*, tenant: Tenant, agent: Agent | None = None) -> dict[str, str]:
    """The stored setting secrets of ``tenant`` itself (``agent`` None) or of one agent: path -> value.
    Only for the services and the pipeline: never return them to a client."""
    rows = SettingSecret.objects.for_tenant(tenant).filter(agent=agent)
    return dict(rows.values_list("path", "value"))


_CALL_SECRETS: dict[tuple[uuid.UUID, int, uuid.UUID], tuple[dict[str, str], dict[str, str]]] = {}
_CALL_SECRETS_MAX = 4096
_call_secrets_lock = threading.Lock()


def setting_secrets_for_call(*, tenant: Tenant, agent: Agent) -> tuple[dict[str, str], dict[str, str]]:
    """The tenant's and the agent's setting secrets (path -> value) for a tool call, read once per
    process and configuration version: every change of a secret raises the tenant's
    ``config_version`` in its own transaction (``services.config_changed``), so a changed or cleared
    secret is never served once the change has committed, in any process."""
    cache_key = (tenant.pk, tenant.config_version, agent.pk)
    found = _CALL_SECRETS.get(cache_key)
    if found is None:
        rows = SettingSecret.objects.for_tenant(tenant).filter(Q(agent__isnull=True) | Q(agent=agent))
        tenant_values: dict[str, str] = {}
        agent_values: dict[str, str] = {}
        for agent_id, path, value in rows.values_list("agent_id", "path", "value"):
            (agent_values if agent_id is not None else tenant_values)[path] = value
        found = (tenant_values, agent_values)
        with _call_secrets_lock:
            if len(_CALL_SECRETS) >= _CALL_SECRETS_MAX:
                _CALL_SECRETS.clear()
            _CALL_SECRETS[cache_key] = found
    return dict(found[0]), dict(found[1])


def api_key_ids_created_by(*, tenant: Tenant, user_id: Any) -> list[str]:
    """The ids of every API key of ``tenant`` that the user ``user_id`` made, revoked ones included."""
    keys = ApiKey.objects.for_tenant(tenant).filter(created_by_id=user_id)
    return [str(pk) for pk in keys.order_by("created_at", "id").values_list("pk", flat=True)]


# --- the platform's own reads (staff pages and commands: not any one tenant's) -------------------------


def platform_tenant_list() -> QuerySet[Tenant]:
    """Every tenant of the installation, by slug (platform staff only)."""
    return Tenant.objects.order_by("slug")


def platform_tenant_get(*, slug: str) -> Tenant | None:
    return Tenant.objects.filter(slug=slug).first()


def platform_events_recent(*, limit: int = 20) -> list[PlatformEvent]:
    return list(PlatformEvent.objects.order_by("-created_at")[:limit])


def tenant_status(tenant_id: Any) -> str | None:
    """The tenant's status now (read from the database, never cached), or None once it is deleted."""
    return Tenant.objects.filter(pk=tenant_id).values_list("status", flat=True).first()
