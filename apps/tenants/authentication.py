"""Authentication for the API and websockets: API keys (Bearer) and dashboard sessions."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apps.tenants import keys
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode
from apps.tenants.models import ApiKey, Membership, Tenant

LAST_USED_RESOLUTION = timedelta(minutes=1)
# Keys that authenticated in this process lately, by the SHA-256 of the raw key (never the key itself):
# the front gate (config/asgi.py) refuses a tenant known to be over its request quota without a thread,
# a query or a key check. Only ever used to refuse, and only for ``RECENT_KEY_SECONDS``.
RECENT_KEY_SECONDS = 60.0
RECENT_KEYS_MAX = 10_000
_recent_keys: dict[str, tuple[str, float]] = {}
TENANT_HEADER = "X-Toolgate-Tenant"


def suspended_message(tenant: Tenant) -> str:
    reason = f": {tenant.suspended_reason}" if tenant.suspended_reason else "."
    return f"Tenant '{tenant.slug}' is suspended{reason} Ask the platform's operators to resume it."


class TenantSuspended(exceptions.APIException):
    """A valid credential of a suspended tenant: 403 with the reason, never a vague 401."""

    status_code = 403
    default_code = ErrorCode.TENANT_SUSPENDED

    def __init__(self, tenant: Tenant) -> None:
        super().__init__(suspended_message(tenant))
        self.tenant = tenant


class ApiKeyPrincipal(AnonymousUser):
    """The ``request.user`` of an API-key request: authenticated, but not a Django user."""

    def __init__(self, api_key: ApiKey) -> None:
        self.api_key = api_key

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    def __str__(self) -> str:
        return f"api-key:{self.api_key.prefix}"


def api_key_from_raw(raw: str) -> ApiKey | None:
    """The usable key for ``raw`` (not revoked, not expired), or None; :class:`TenantSuspended` when it
    is a usable key of a suspended tenant.

    API keys are looked up across tenants by design: the key itself names its tenant.
    """
    prefix = keys.parse_prefix(raw)
    if prefix is None:
        return None
    try:
        key = ApiKey.objects.dangerously_all_tenants().select_related("tenant").get(prefix=prefix)
    except ApiKey.DoesNotExist:
        return None
    if not keys.matches(raw, key.digest) or not key.is_usable:
        return None
    if not key.tenant.is_active:
        raise TenantSuspended(key.tenant)
    _remember(raw, str(key.tenant_id))
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.for_tenant(key.tenant).filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def _fingerprint(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _remember(raw: str, tenant_id: str) -> None:
    if len(_recent_keys) >= RECENT_KEYS_MAX:
        _recent_keys.clear()
    _recent_keys[_fingerprint(raw)] = (tenant_id, time.monotonic() + RECENT_KEY_SECONDS)


def tenant_of_recent_key(raw: str) -> str | None:
    """The tenant id of ``raw`` if that exact key authenticated in this process in the last minute."""
    known = _recent_keys.get(_fingerprint(raw))
    if known is None or known[1] < time.monotonic():
        return None
    return known[0]


def actor_for_api_key(key: ApiKey) -> Actor:
    return Actor(tenant=key.tenant, role=key.role, kind="api_key", api_key=key)


def actor_for_api_key_header(header: str) -> Actor | None:
    scheme, _, raw = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    try:
        key = api_key_from_raw(raw.strip())
    except TenantSuspended:
        return None
    return actor_for_api_key(key) if key is not None else None


def actor_for_session_user(
    user: AbstractBaseUser, tenant_id: str | None, tenant_slug: str | None = None
) -> Actor | None:
    """The actor of a logged-in user in the chosen tenant (by slug, then the session's choice, then the
    first membership), or None when the user belongs to no such active tenant."""
    memberships = (
        Membership.objects.dangerously_all_tenants()
        .select_related("tenant")
        .filter(user_id=user.pk, tenant__status=Tenant.Status.ACTIVE)
        .order_by("tenant__slug")
    )
    if tenant_slug:
        memberships = memberships.filter(tenant__slug=tenant_slug)
    elif tenant_id:
        chosen = memberships.filter(tenant_id=tenant_id).first()
        if chosen is not None:
            return Actor(tenant=chosen.tenant, role=chosen.role, kind="user", user=user)
    membership = memberships.first()
    if membership is None:
        return None
    return Actor(tenant=membership.tenant, role=membership.role, kind="user", user=user)


def suspended_tenants_of(user: AbstractBaseUser) -> dict[str, Tenant]:
    """The suspended tenants ``user`` belongs to, by slug (to say why a login shows nothing)."""
    memberships = (
        Membership.objects.dangerously_all_tenants()
        .select_related("tenant")
        .filter(user_id=user.pk)
        .exclude(tenant__status=Tenant.Status.ACTIVE)
        .order_by("tenant__slug")
    )
    return {m.tenant.slug: m.tenant for m in memberships}


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Actor] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, raw = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api key>'.")
        raw = raw.strip()
        if keys.parse_prefix(raw) is None:
            raise exceptions.AuthenticationFailed("Malformed API key: expected tgk_<prefix>_<secret>.")
        key = api_key_from_raw(raw)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid, revoked or expired API key.")
        return ApiKeyPrincipal(key), actor_for_api_key(key)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="toolgate"'


class TenantSessionAuthentication(authentication.SessionAuthentication):
    """Dashboard sessions (CSRF enforced). The tenant is the ``X-Toolgate-Tenant`` header's slug, else
    the one chosen in the dashboard, else the user's first."""

    def authenticate(self, request: Request) -> tuple[Any, Actor] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        slug = request.META.get("HTTP_X_TOOLGATE_TENANT", "").strip() or None
        actor = actor_for_session_user(user, request._request.session.get("tenant_id"), slug)
        if actor is None:
            suspended = suspended_tenants_of(user)
            if slug and slug in suspended:
                raise TenantSuspended(suspended[slug])
            if slug:
                raise exceptions.PermissionDenied(f"You are not a member of an active tenant '{slug}'.")
            if suspended:
                raise TenantSuspended(next(iter(suspended.values())))
            raise exceptions.PermissionDenied("You are not a member of any active tenant.")
        return user, actor
