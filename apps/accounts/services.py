"""The administration of a tenant: every write to a tenant, its members, agents and API keys (the models
of ``apps.tenants``). Each service is atomic and records its audit event inside."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from apps.audit.services import record
from apps.realtime import events
from apps.tenants import keys, quotas, selectors, setting_secrets
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, Forbidden, ServiceError
from apps.tenants.models import Agent, ApiKey, Membership, SettingSecret, Tenant
from apps.tenants.roles import Role, role_at_least
from apps.tenants.services import config_changed

AGENT_FIELDS = ("name", "description", "type", "provider", "model", "settings")


def _validation_error(exc: ValidationError) -> ServiceError:
    details = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
    first_field, messages = next(iter(details.items()))
    return ServiceError(ErrorCode.INVALID, f"{first_field}: {messages[0]}", details=details)


def _user_by_email(email: str) -> User | None:
    return User.objects.filter(email__iexact=email).order_by("pk").first()


# --- tenants ----------------------------------------------------------------------------------------


@transaction.atomic
def tenant_create(
    *, slug: str, name: str = "", owner_email: str | None = None, owner_password: str | None = None
) -> Tenant:
    """Create a tenant (operators only: management command), optionally with its first owner."""
    tenant = Tenant(slug=slug, name=name or slug)
    try:
        tenant.full_clean()
    except ValidationError as exc:
        if "slug" in getattr(exc, "error_dict", {}) and Tenant.objects.filter(slug=slug).exists():
            raise Conflict(ErrorCode.TENANT_EXISTS, f"A tenant with slug '{slug}' already exists.") from None
        raise _validation_error(exc) from None
    tenant.save()
    system = Actor.system(tenant)
    record(
        actor=system,
        verb="tenant.created",
        target_type="tenant",
        target_id=str(tenant.pk),
        data={"slug": tenant.slug, "name": tenant.name},
    )
    if owner_email:
        membership_create(actor=system, email=owner_email, role=Role.OWNER, password=owner_password)
    return tenant


# --- dashboard sessions -----------------------------------------------------------------------------


@transaction.atomic
def session_record(*, actor: Actor, verb: str) -> None:
    """Record a dashboard login (``auth.login``) or logout (``auth.logout``) in the actor's tenant."""
    if verb not in {"auth.login", "auth.logout"} or actor.user is None:
        raise ValueError(f"not a session event: {verb!r}")
    record(
        actor=actor,
        verb=verb,
        target_type="user",
        target_id=str(actor.user.pk),
        data={"email": getattr(actor.user, "email", "")},
    )


# --- memberships ------------------------------------------------------------------------------------


def _membership_data(m: Membership) -> dict[str, Any]:
    return {"id": str(m.pk), "user_id": m.user_id, "email": getattr(m.user, "email", ""), "role": m.role}


@transaction.atomic
def membership_create(*, actor: Actor, email: str, role: str, password: str | None = None) -> Membership:
    """Add a user (by email) to the actor's tenant. A new user is created when ``password`` is given."""
    if role not in Role.values:
        raise ServiceError(ErrorCode.INVALID, f"role: '{role}' is not one of {', '.join(Role.values)}.")
    email = email.strip().lower()
    user = _user_by_email(email)
    if user is None:
        if not password:
            raise ServiceError(
                ErrorCode.INVALID,
                "password: required to create a new user for this email.",
                details={"password": ["Required for a new user."]},
            )
        user = User(username=email, email=email)
        try:
            validate_password(password, user)
            user.set_password(password)
            user.full_clean()
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                raise _validation_error(exc) from None
            raise ServiceError(
                ErrorCode.INVALID, f"password: {exc.messages[0]}", details={"password": exc.messages}
            ) from None
        user.save()
    elif password:
        raise ServiceError(
            ErrorCode.INVALID,
            "password: this user already exists; leave the password out.",
            details={"password": ["User already exists."]},
        )
    if Membership.objects.for_tenant(actor.tenant).filter(user=user).exists():
        raise Conflict(ErrorCode.DUPLICATE_MEMBER, f"{email} is already a member of this tenant.")
    membership = Membership(tenant=actor.tenant, user=user, role=role)
    membership.full_clean()
    membership.save()
    data = _membership_data(membership)
    record(
        actor=actor,
        verb="membership.created",
        target_type="membership",
        target_id=str(membership.pk),
        data=data,
    )
    events.publish(tenant=actor.tenant, topic="members", type="membership.created", data=data)
    return membership


def _ensure_not_last_owner(membership: Membership) -> None:
    if membership.role != Role.OWNER:
        return
    owners = Membership.objects.for_tenant(membership.tenant).select_for_update().filter(role=Role.OWNER)
    if owners.count() <= 1:
        raise Conflict(ErrorCode.LAST_OWNER, "A tenant must keep at least one owner.")


@transaction.atomic
def membership_update(*, actor: Actor, membership: Membership, role: str) -> Membership:
    if role not in Role.values:
        raise ServiceError(ErrorCode.INVALID, f"role: '{role}' is not one of {', '.join(Role.values)}.")
    if role == membership.role:
        return membership
    if role != Role.OWNER:
        _ensure_not_last_owner(membership)
    before = membership.role
    membership.role = role
    membership.full_clean()
    membership.save(update_fields=["role", "updated_at"])
    data = {**_membership_data(membership), "previous_role": before}
    record(
        actor=actor,
        verb="membership.updated",
        target_type="membership",
        target_id=str(membership.pk),
        data=data,
    )
    events.publish(tenant=actor.tenant, topic="members", type="membership.updated", data=data)
    events.disconnect(
        kind="member",
        ident=f"{membership.tenant_id}:{membership.user_id}",
        reason=f"Your role in this tenant changed to {role}; reconnect.",
    )
    return membership


@transaction.atomic
def membership_delete(*, actor: Actor, membership: Membership) -> None:
    _ensure_not_last_owner(membership)
    data = _membership_data(membership)
    membership_id = str(membership.pk)
    Membership.objects.for_tenant(actor.tenant).filter(pk=membership.pk).delete()
    record(
        actor=actor, verb="membership.deleted", target_type="membership", target_id=membership_id, data=data
    )
    events.publish(tenant=actor.tenant, topic="members", type="membership.deleted", data=data)
    events.disconnect(
        kind="member",
        ident=f"{membership.tenant_id}:{membership.user_id}",
        reason="You are no longer a member of this tenant.",
    )


# --- agents -----------------------------------------------------------------------------------------


def agent_data(agent: Agent) -> dict[str, Any]:
    """An agent as audit rows and events show it: its settings with each secret as "set"/"not set"."""
    return {
        "id": str(agent.pk),
        "key": agent.key,
        "name": agent.name,
        "description": agent.description,
        "type": agent.type,
        "provider": agent.provider,
        "model": agent.model,
        "settings": public_settings(agent),
    }


# --- secret-bearing settings ------------------------------------------------------------------------


def public_settings(agent: Agent) -> dict[str, Any]:
    """``agent``'s settings as anyone may read them: each secret-bearing key shown as
    ``{"set": true|false}``, never its value."""
    return setting_secrets.with_status(agent.settings or {}, selectors.agent_secret_paths(agent=agent))


def _check_secrets(settings: Any) -> None:
    """Refuse a malformed secret before it is taken out of the document (the rest of the document is
    validated with the model, after the secrets are out)."""
    if not isinstance(settings, dict):
        return
    errors = setting_secrets.validate(settings)
    if errors:
        messages = [f"{key}: {message}" for key, items in errors.items() for message in items]
        raise ServiceError(ErrorCode.INVALID, f"settings: {messages[0]}", details={"settings": messages})


def _store_secrets(
    *, tenant: Tenant, agent: Agent | None, changes: setting_secrets.Changes
) -> dict[str, Any]:
    """Store or clear the secrets ``changes`` asks for (encrypted; the caller holds the row lock of the
    tenant or agent). Answers the audit entries of those that really changed: that they changed and
    whether one is now set, never a value."""
    if not changes:
        return {}
    current = selectors.setting_secret_values(tenant=tenant, agent=agent)
    diff: dict[str, Any] = {}
    for path, value in sorted(changes.items()):
        if current.get(path) == value:
            continue
        rows = SettingSecret.objects.for_tenant(tenant).filter(agent=agent, path=path)
        if value is None:
            rows.delete()
        elif path in current:
            secret = rows.get()
            secret.value = value
            secret.save(update_fields=["value", "updated_at"])
        else:
            SettingSecret.objects.create(tenant=tenant, agent=agent, path=path, value=value)
        diff[f"settings.{path}"] = {"changed": True, "set": value is not None}
    if diff:
        config_changed(tenant)
        if agent is not None and hasattr(agent, "secret_paths"):
            del agent.secret_paths  # the annotation read before the change
    return diff


def _save_agent(agent: Agent, *, update_fields: list[str] | None = None) -> None:
    try:
        agent.full_clean(validate_constraints=False)
    except ValidationError as exc:
        raise _validation_error(exc) from None
    try:
        with transaction.atomic():
            agent.save(update_fields=update_fields)
    except IntegrityError:
        raise Conflict(
            ErrorCode.DUPLICATE_AGENT_KEY,
            f"An agent with key '{agent.key}' already exists in this tenant.",
            details={"key": ["Already in use."]},
        ) from None


@transaction.atomic
def agent_create(
    *,
    actor: Actor,
    key: str,
    name: str,
    description: str = "",
    type: str = Agent.Type.OPEN,
    provider: str = "",
    model: str = "",
    settings: dict[str, Any] | None = None,
) -> Agent:
    _check_secrets(settings)
    public, secret_changes = setting_secrets.split(settings or {})
    quotas.lock_tenant(actor.tenant)
    quotas.enforce_count(
        tenant=actor.tenant, name="agents", used=Agent.objects.for_tenant(actor.tenant).count()
    )
    agent = Agent(
        tenant=actor.tenant,
        key=key,
        name=name,
        description=description,
        type=type,
        provider=provider,
        model=model,
        settings=public,
    )
    _save_agent(agent)
    _store_secrets(tenant=actor.tenant, agent=agent, changes=secret_changes)
    config_changed(actor.tenant)
    data = agent_data(agent)
    record(actor=actor, verb="agent.created", target_type="agent", target_id=str(agent.pk), data=data)
    events.publish(tenant=actor.tenant, topic="agents", type="agent.created", data=data)
    return agent


@transaction.atomic
def agent_update(*, actor: Actor, agent: Agent, changes: dict[str, Any]) -> Agent:
    """Apply ``changes`` (any of name, description, type, provider, model, settings). The key is fixed:
    agent loops and policies refer to it."""
    unknown = set(changes) - set(AGENT_FIELDS)
    if unknown:
        raise ServiceError(ErrorCode.INVALID, f"Cannot change: {', '.join(sorted(unknown))}.")
    secret_changes: setting_secrets.Changes = {}
    if "settings" in changes:
        # Secrets go to their encrypted rows; the settings document keeps the rest.
        _check_secrets(changes["settings"])
        public, secret_changes = setting_secrets.split(changes["settings"] or {})
        changes = {**changes, "settings": public}
    before = agent_data(agent)
    fields = [f for f, v in changes.items() if getattr(agent, f) != v]
    if not fields and not secret_changes:
        return agent
    for field in fields:
        setattr(agent, field, changes[field])
    if fields:
        _save_agent(agent, update_fields=[*fields, "updated_at"])
    if secret_changes:
        Agent.objects.for_tenant(actor.tenant).select_for_update().filter(pk=agent.pk).first()
    secrets_diff = _store_secrets(tenant=actor.tenant, agent=agent, changes=secret_changes)
    if not fields and not secrets_diff:
        return agent
    config_changed(actor.tenant)
    after = agent_data(agent)
    diff = {f: {"from": before[f], "to": after[f]} for f in fields}
    diff.update(secrets_diff)
    record(
        actor=actor,
        verb="agent.updated",
        target_type="agent",
        target_id=str(agent.pk),
        data={"key": agent.key, "changes": diff},
    )
    events.publish(tenant=actor.tenant, topic="agents", type="agent.updated", data=after)
    return agent


@transaction.atomic
def agent_delete(*, actor: Actor, agent: Agent) -> None:
    data = agent_data(agent)
    try:
        with transaction.atomic():
            Agent.objects.for_tenant(actor.tenant).filter(pk=agent.pk).delete()
    except ProtectedError as exc:
        teams = sorted({str(obj) for obj in exc.protected_objects})
        raise Conflict(
            ErrorCode.CONFLICT,
            f"Agent {agent.key!r} leads the team {', '.join(teams)}; give the team another lead first.",
        ) from None
    config_changed(actor.tenant)
    record(actor=actor, verb="agent.deleted", target_type="agent", target_id=data["id"], data=data)
    events.publish(
        tenant=actor.tenant, topic="agents", type="agent.deleted", data={"id": data["id"], "key": data["key"]}
    )


# --- API keys ---------------------------------------------------------------------------------------


def invalid_key_origin_message(origin: str) -> str:
    """Why ``origin`` cannot be an API key's origin (``system`` is named apart: it is Toolgate's own)."""
    choices = ", ".join(ApiKey.Origin.values)
    if origin == "system":
        return f"'system' belongs to Toolgate's own jobs and no API key can have it; use one of {choices}."
    return f"'{origin}' is not one of {choices}."


def api_key_data(key: ApiKey) -> dict[str, Any]:
    return {
        "id": str(key.pk),
        "name": key.name,
        "prefix": key.prefix,
        "role": key.role,
        "origin": key.origin,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "state": key.state,
    }


@transaction.atomic
def api_key_create(
    *,
    actor: Actor,
    name: str,
    role: str = Role.MEMBER,
    origin: str = ApiKey.Origin.USER,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its raw secret, which is never stored or shown again.

    ``origin`` is the origin of every tool call made with the key (see :class:`ApiKey`); a request
    cannot change it. ``system`` is refused: it is Toolgate's own, and an exec command of origin
    ``system`` is approved without asking anyone."""
    if role not in Role.values:
        raise ServiceError(ErrorCode.INVALID, f"role: '{role}' is not one of {', '.join(Role.values)}.")
    if origin not in ApiKey.Origin.values:
        raise ServiceError(
            ErrorCode.INVALID,
            f"origin: {invalid_key_origin_message(origin)}",
            details={"origin": [invalid_key_origin_message(origin)]},
        )
    if not role_at_least(actor.role, role):
        raise Forbidden(
            ErrorCode.ROLE_TOO_HIGH, f"You cannot create a key with role {role} (yours is {actor.role})."
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise ServiceError(
            ErrorCode.INVALID,
            "expires_at: must be in the future.",
            details={"expires_at": ["Must be in the future."]},
        )
    name = name.strip()
    if ApiKey.objects.for_tenant(actor.tenant).filter(name__iexact=name, revoked_at__isnull=True).exists():
        raise Conflict(
            ErrorCode.DUPLICATE_API_KEY_NAME,
            f"An active API key named '{name}' already exists.",
            details={"name": ["Already in use."]},
        )
    new = keys.generate()
    user = actor.user if actor.kind == "user" else None
    key = ApiKey(
        tenant=actor.tenant,
        name=name,
        prefix=new.prefix,
        digest=new.digest,
        role=role,
        origin=origin,
        expires_at=expires_at,
        created_by=user,
    )  # type: ignore[misc]
    try:
        key.full_clean(validate_constraints=False)
    except ValidationError as exc:
        raise _validation_error(exc) from None
    key.save()
    data = api_key_data(key)
    record(actor=actor, verb="api_key.created", target_type="api_key", target_id=str(key.pk), data=data)
    events.publish(tenant=actor.tenant, topic="api_keys", type="api_key.created", data=data)
    return key, new.raw


@transaction.atomic
def api_key_revoke(*, actor: Actor, api_key: ApiKey) -> ApiKey:
    locked = ApiKey.objects.for_tenant(actor.tenant).select_for_update().get(pk=api_key.pk)
    if locked.revoked_at is not None:
        raise Conflict(ErrorCode.ALREADY_REVOKED, "This API key is already revoked.")
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at", "updated_at"])
    data = api_key_data(locked)
    record(actor=actor, verb="api_key.revoked", target_type="api_key", target_id=str(locked.pk), data=data)
    events.publish(tenant=actor.tenant, topic="api_keys", type="api_key.revoked", data=data)
    events.disconnect(kind="api_key", ident=str(locked.pk), reason="This API key was revoked.")
    return locked


@transaction.atomic
def api_key_record_expiry(*, api_key: ApiKey) -> bool:
    """Record once that a key has passed its expiry (called by the periodic sweep, per tenant)."""
    locked = ApiKey.objects.for_tenant(api_key.tenant).select_for_update().get(pk=api_key.pk)
    if locked.expiry_recorded_at is not None or not locked.is_expired or locked.revoked_at is not None:
        return False
    locked.expiry_recorded_at = timezone.now()
    locked.save(update_fields=["expiry_recorded_at", "updated_at"])
    data = api_key_data(locked)
    record(
        actor=Actor.system(locked.tenant),
        verb="api_key.expired",
        target_type="api_key",
        target_id=str(locked.pk),
        data=data,
    )
    events.publish(tenant=locked.tenant, topic="api_keys", type="api_key.expired", data=data)
    events.disconnect(kind="api_key", ident=str(locked.pk), reason="This API key expired.")
    return True


# --- tenant settings --------------------------------------------------------------------------------

TENANT_FIELDS = ("name", "settings")


@transaction.atomic
def tenant_update(*, actor: Actor, changes: dict[str, Any]) -> Tenant:
    """Change the actor's tenant: its name, or settings keys (a key set to None is removed)."""
    unknown = set(changes) - set(TENANT_FIELDS)
    if unknown:
        raise ServiceError(ErrorCode.INVALID, f"Cannot change: {', '.join(sorted(unknown))}.")
    tenant = Tenant.objects.select_for_update().get(pk=actor.tenant.pk)
    before_name, before_settings = tenant.name, dict(tenant.settings)
    secret_changes: setting_secrets.Changes = {}
    if "name" in changes:
        tenant.name = changes["name"]
    if "settings" in changes:
        # Secrets go to their encrypted rows (a reset key clears those under it); the document keeps
        # the rest.
        _check_secrets(changes["settings"])
        public, secret_changes = setting_secrets.split(changes["settings"])
        removed = {k for k, v in public.items() if v is None}
        secret_changes = {**setting_secrets.cleared_by_reset(removed), **secret_changes}
        merged = {**tenant.settings, **public}
        tenant.settings = {k: v for k, v in merged.items() if v is not None}
    try:
        tenant.full_clean(validate_constraints=False, exclude=["slug"])
    except ValidationError as exc:
        raise _validation_error(exc) from None
    secrets_diff = _store_secrets(tenant=tenant, agent=None, changes=secret_changes)
    if (before_name, before_settings) == (tenant.name, tenant.settings) and not secrets_diff:
        return tenant
    tenant.save(update_fields=["name", "settings", "updated_at"])
    if before_settings != tenant.settings:
        config_changed(tenant)
    diff: dict[str, Any] = {}
    if before_name != tenant.name:
        diff["name"] = {"from": before_name, "to": tenant.name}
    for key in sorted(set(before_settings) | set(tenant.settings)):
        if before_settings.get(key) != tenant.settings.get(key):
            diff[f"settings.{key}"] = {"from": before_settings.get(key), "to": tenant.settings.get(key)}
    diff.update(secrets_diff)
    record(
        actor=actor,
        verb="tenant.updated",
        target_type="tenant",
        target_id=str(tenant.pk),
        data={"changes": diff},
    )
    return tenant
