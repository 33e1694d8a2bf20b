"""Every write to MCP servers, grants, per-user credentials and access requests. Each is atomic,
audited (secrets never: only the names of headers and env variables, and whether an API key is set),
published on the tenant's ``mcp`` topic after commit, and raises the tenant's ``config_version`` when it
can change which tools an agent or user reaches. The decision on an access request is also published to
the actor that asked for it (its ``me`` topic).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import record_and_publish
from apps.mcp_grants import collisions, naming, validation
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
    server_name_validator,
)
from apps.realtime import events
from apps.tenants import quotas
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError, invalid_fields
from apps.tenants.models import Agent
from apps.tenants.services import config_changed
from apps.toolkit.scrubber import Scrubber

TOPIC = "mcp"
MAX_REASON = 2000
MAX_USER_ID = 255
SERVER_FIELDS = (
    "display_name",
    "transport",
    "command",
    "args",
    "url",
    "headers",
    "env",
    "api_key",
    "tool_prefix",
    "prefix_tools",
    "timeout_sec",
    "network",
    "settings",
    "enabled",
)


def _scrubber(server: MCPServer) -> Scrubber:
    """A scrubber that knows the server's own secrets (its API key, header and env values)."""
    return Scrubber(
        [server.api_key or "", *map(str, server.headers.values()), *map(str, server.env.values())]
    )


def server_data(server: MCPServer) -> dict[str, Any]:
    """What may be shown and audited of a server: never the values of headers, env or the API key, and
    its command, arguments and URL through the credential scrubber (with those values registered), so a
    token written into a query string or an argument is not logged either."""
    scrub = _scrubber(server).scrub
    return {
        "id": str(server.pk),
        "name": server.name,
        "display_name": server.display_name,
        "transport": server.transport,
        "command": scrub(server.command),
        "args": [scrub(str(arg)) for arg in server.args],
        "url": scrub(server.url),
        "headers": sorted(server.headers),
        "env": sorted(server.env),
        "has_api_key": bool(server.api_key),
        "tool_prefix": server.tool_prefix,
        "prefix_tools": server.prefix_tools,
        "registered_prefix": naming.registered_prefix(server),
        "tool_conflicts": list(server.tool_conflicts or []),
        "timeout_sec": server.timeout_sec,
        "network": server.network,
        "settings": server.settings,
        "enabled": server.enabled,
        "status": server.status,
    }


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise invalid_fields({"name": ["a string."]})
    try:
        server_name_validator(name)
    except DjangoValidationError as exc:
        raise invalid_fields({"name": [str(getattr(exc, "message", exc))]}) from None
    return name


def _check_prefix_free(actor: Actor, server: MCPServer) -> None:
    """A prefixed server's prefix is no other prefixed server's; an unprefixed server's discovered tools
    take no name that is taken (``collisions``)."""
    if not server.prefix_tools:
        _check_names_free(actor, server)
        return
    prefix = naming.server_prefix(server)
    others = MCPServer.objects.for_tenant(actor.tenant).exclude(pk=server.pk).filter(prefix_tools=True)
    for other in others:
        if naming.server_prefix(other) == prefix:
            raise Conflict(
                ErrorCode.CONFLICT,
                f"tool_prefix: the server {other.name!r} already registers its tools as {prefix}__<tool>.",
            )


def _check_names_free(actor: Actor, server: MCPServer) -> None:
    if server.pk is None:
        return  # nothing discovered yet: discovery checks each tool (``client.store_tools``)
    tools = MCPServerTool.objects.for_tenant(actor.tenant).filter(server_id=server.pk)
    found = collisions.conflicts(actor.tenant, server, tools.values_list("name", flat=True))
    if found:
        raise Conflict(
            ErrorCode.CONFLICT,
            f"prefix_tools: {collisions.summary(found)} Keep its tools prefixed, or rename or remove the "
            "other tool first.",
            details={"prefix_tools": [found[tool] for tool in sorted(found)][:20]},
        )


def _apply(server: MCPServer, fields: dict[str, Any]) -> None:
    errors = validation.check_server(fields)
    if not isinstance(fields.get("network", False), bool):
        errors = {**errors, "network": ["true or false."]}
    if not isinstance(fields.get("prefix_tools", True), bool):
        errors = {**errors, "prefix_tools": ["true or false."]}
    if errors:
        raise invalid_fields(errors)
    for key in SERVER_FIELDS:
        if key in fields:
            setattr(server, key, fields[key])


def _current_fields(server: MCPServer) -> dict[str, Any]:
    return {key: getattr(server, key) for key in SERVER_FIELDS}


# A change to any of these reaches the server differently (or again), or names its tools differently
# (``prefix_tools``: which of them collide changes): its tools are discovered anew.
CONNECTION_FIELDS = frozenset(SERVER_FIELDS) - {"display_name", "tool_prefix", "settings"}


def _discover_after_commit(server: MCPServer) -> None:
    """Pending discovery retries are superseded; an enabled server is discovered after commit."""
    from apps.mcp_grants.tasks import restart_discovery

    restart_discovery(server)


@transaction.atomic
def server_create(*, actor: Actor, name: str, transport: str, **fields: Any) -> MCPServer:
    """Register a server (validated as a whole); its tools are discovered in the background once the
    registration commits."""
    unknown = set(fields) - set(SERVER_FIELDS)
    if unknown:
        raise invalid_fields({sorted(unknown)[0]: ["unknown field."]})
    name = _check_name(name)
    server = MCPServer(tenant=actor.tenant, name=name, created_by=actor.label[:255])
    _apply(server, {**_current_fields(server), **fields, "transport": transport})
    _check_prefix_free(actor, server)
    quotas.lock_tenant(actor.tenant)
    used = MCPServer.objects.for_tenant(actor.tenant).count()
    quotas.enforce_count(tenant=actor.tenant, name="mcp_servers", used=used)
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError:
        raise Conflict(ErrorCode.CONFLICT, f"An MCP server named {name!r} exists already.") from None
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="mcp.server.created",
        target_type="mcp_server",
        target_id=str(server.pk),
        data=server_data(server),
    )
    _discover_after_commit(server)
    return server


@transaction.atomic
def server_update(*, actor: Actor, server: MCPServer, **changes: Any) -> MCPServer:
    """Change any registration field (not the name: grants and policies refer to it). The result is
    validated as a whole; a change to how the server is reached has its tools discovered anew."""
    unknown = set(changes) - set(SERVER_FIELDS)
    if unknown:
        raise invalid_fields({sorted(unknown)[0]: ["unknown field (the name cannot be changed)."]})
    locked = MCPServer.objects.for_tenant(actor.tenant).select_for_update().get(pk=server.pk)
    before = _current_fields(locked)
    _apply(locked, {**before, **changes})
    if _current_fields(locked) == before:
        return locked
    _check_prefix_free(actor, locked)
    locked.save()
    config_changed(actor.tenant)
    data = server_data(locked)
    data["changed"] = sorted(k for k in SERVER_FIELDS if before[k] != getattr(locked, k))
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="mcp.server.updated",
        target_type="mcp_server",
        target_id=str(locked.pk),
        data=data,
    )
    if CONNECTION_FIELDS & set(data["changed"]):
        _discover_after_commit(locked)
    return locked


@transaction.atomic
def server_delete(*, actor: Actor, server: MCPServer) -> None:
    data = {"id": str(server.pk), "name": server.name}
    deleted, _ = MCPServer.objects.for_tenant(actor.tenant).filter(pk=server.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "MCP server not found.", status=404)
    from apps.mcp_grants.tasks import cancel_retries

    cancel_retries(server.pk)
    config_changed(actor.tenant)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="mcp.server.deleted",
        target_type="mcp_server",
        target_id=data["id"],
        data=data,
    )


def server_connect(*, actor: Actor, server: MCPServer, store: bool) -> dict[str, Any]:
    """Connect to ``server`` once with a fresh session (not the reused one), list its tools and close:
    "test connection"; with ``store`` the tools found become the server's discovered tools ("refresh",
    raising the configuration version when they changed) and its status is recorded. Audited and
    published with the outcome; the error passes the scrubber with the server's secrets registered.
    Runs outside a transaction: connecting may take up to its timeout."""
    from apps.mcp_grants import client, tasks

    probe = client.probe(server, store=store)
    if store and probe.ok:
        tasks.discovery_succeeded(server)
    tools = [
        {
            "name": t.name,
            "registered_name": naming.registered_name(server, t.name),
            "description": t.description,
        }
        for t in probe.tools
    ]
    data: dict[str, Any] = {
        "id": str(server.pk),
        "name": server.name,
        "ok": probe.ok,
        "error": _scrubber(server).scrub(probe.error),
        "duration_ms": probe.duration_ms,
    }
    verb = "mcp.server.refreshed" if store else "mcp.server.tested"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type="mcp_server",
        target_id=data["id"],
        data={**data, "tools": [t.name for t in probe.tools]},
    )
    data["tools"] = tools
    return data


# --- grants -------------------------------------------------------------------------------------------


def grant_data(grant: AgentGrant | UserGrant) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(grant.pk),
        "server": grant.server.name,
        "enabled": grant.enabled,
        "tool_allow": grant.tool_allow,
        "tool_deny": list(grant.tool_deny or []),
        "resources": grant.resources,
        "prompts": grant.prompts,
        "config_overrides": grant.config_overrides,
        "granted_by": grant.granted_by,
    }
    if isinstance(grant, AgentGrant):
        data["agent"] = grant.agent.key
    else:
        data["user_id"] = grant.user_id
    return data


def _check_grant(
    server: MCPServer,
    actor: Actor,
    tool_allow: Any,
    tool_deny: Any,
    config_overrides: Any,
    enabled: Any,
    resources: Any = True,
    prompts: Any = True,
) -> None:
    if server.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "server: a server of this tenant only.")
    errors: dict[str, list[str]] = {}
    for field, value, nullable in (("tool_allow", tool_allow, True), ("tool_deny", tool_deny, False)):
        message = validation.tool_list_error(value, nullable=nullable)
        if message:
            errors[field] = [message]
    if not isinstance(config_overrides, dict):
        errors["config_overrides"] = ["an object."]
    elif len(str(config_overrides)) > validation.MAX_SETTINGS_BYTES:
        errors["config_overrides"] = [f"at most {validation.MAX_SETTINGS_BYTES} bytes."]
    for field, value in (("enabled", enabled), ("resources", resources), ("prompts", prompts)):
        if not isinstance(value, bool):
            errors[field] = ["true or false."]
    if errors:
        raise invalid_fields(errors)


def _check_user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > MAX_USER_ID:
        raise invalid_fields({"user_id": [f"1 to {MAX_USER_ID} characters."]})
    if user_id in ("system",):
        raise invalid_fields({"user_id": ["'system' is no user: synthetic identities ignore user grants."]})
    return user_id


def _grant_set(
    actor: Actor,
    model: type[AgentGrant] | type[UserGrant],
    kind: str,
    lookup: dict[str, Any],
    *,
    enabled: bool,
    tool_allow: list[str] | None,
    tool_deny: list[str],
    resources: bool,
    prompts: bool,
    config_overrides: dict[str, Any],
) -> Any:
    """Create or replace the grant ``lookup`` names (checked already), audited and published."""
    grant, created = model.objects.for_tenant(actor.tenant).update_or_create(
        **lookup,
        defaults={
            "tenant": actor.tenant,
            "enabled": enabled,
            "tool_allow": tool_allow,
            "tool_deny": tool_deny,
            "resources": resources,
            "prompts": prompts,
            "config_overrides": config_overrides,
            "granted_by": actor.label[:255],
        },
    )
    config_changed(actor.tenant)
    verb = f"mcp.{kind}.created" if created else f"mcp.{kind}.updated"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type=f"mcp_{kind}",
        target_id=str(grant.pk),
        data=grant_data(grant),
    )
    return grant


@transaction.atomic
def agent_grant_set(
    *,
    actor: Actor,
    server: MCPServer,
    agent: Agent,
    enabled: bool = True,
    tool_allow: list[str] | None = None,
    tool_deny: list[str] | None = None,
    resources: bool = True,
    prompts: bool = True,
    config_overrides: dict[str, Any] | None = None,
) -> AgentGrant:
    """Create or replace the grant of ``server`` to ``agent``."""
    tool_deny = [] if tool_deny is None else tool_deny
    config_overrides = {} if config_overrides is None else config_overrides
    _check_grant(server, actor, tool_allow, tool_deny, config_overrides, enabled, resources, prompts)
    if agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "agent: an agent of this tenant only.")
    grant: AgentGrant = _grant_set(
        actor,
        AgentGrant,
        "agent_grant",
        {"server": server, "agent": agent},
        enabled=enabled,
        tool_allow=tool_allow,
        tool_deny=tool_deny,
        resources=resources,
        prompts=prompts,
        config_overrides=config_overrides,
    )
    return grant


@transaction.atomic
def user_grant_set(
    *,
    actor: Actor,
    server: MCPServer,
    user_id: str,
    enabled: bool = True,
    tool_allow: list[str] | None = None,
    tool_deny: list[str] | None = None,
    resources: bool = True,
    prompts: bool = True,
    config_overrides: dict[str, Any] | None = None,
) -> UserGrant:
    """Create or replace ``user_id``'s grant of ``server`` (it narrows or, disabled, vetoes; never adds)."""
    tool_deny = [] if tool_deny is None else tool_deny
    config_overrides = {} if config_overrides is None else config_overrides
    _check_grant(server, actor, tool_allow, tool_deny, config_overrides, enabled, resources, prompts)
    user_id = _check_user_id(user_id)
    grant: UserGrant = _grant_set(
        actor,
        UserGrant,
        "user_grant",
        {"server": server, "user_id": user_id},
        enabled=enabled,
        tool_allow=tool_allow,
        tool_deny=tool_deny,
        resources=resources,
        prompts=prompts,
        config_overrides=config_overrides,
    )
    return grant


@transaction.atomic
def grant_delete(*, actor: Actor, grant: AgentGrant | UserGrant) -> None:
    data = grant_data(grant)
    model = type(grant)
    deleted, _ = model.objects.for_tenant(actor.tenant).filter(pk=grant.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Grant not found.", status=404)
    config_changed(actor.tenant)
    kind = "agent_grant" if isinstance(grant, AgentGrant) else "user_grant"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=f"mcp.{kind}.deleted",
        target_type=f"mcp_{kind}",
        target_id=data["id"],
        data=data,
    )


# --- access requests ----------------------------------------------------------------------------------


def request_data(req: AccessRequest) -> dict[str, Any]:
    return {
        "id": str(req.pk),
        "server": req.server.name,
        "scope": req.scope,
        "agent": req.agent.key if req.agent is not None else None,
        "user_id": req.user_id,
        "tool_allow": req.tool_allow,
        "granted_tool_allow": req.granted_tool_allow,
        "reason": req.reason,
        "status": req.status,
        "requested_by": req.requested_by,
        "requester": {"kind": req.requester_kind, "id": req.requester_id},
        "created_at": req.created_at.isoformat() if req.created_at else None,
        "reviewed_by": req.reviewed_by,
        "reviewed_at": req.reviewed_at.isoformat() if req.reviewed_at else None,
        "review_note": req.review_note,
    }


@transaction.atomic
def request_create(
    *,
    actor: Actor,
    server: MCPServer,
    scope: str,
    agent: Agent | None = None,
    user_id: str = "",
    tool_allow: list[str] | None = None,
    reason: str = "",
) -> AccessRequest:
    """Ask for a grant; the status is always ``pending`` (B §3.4)."""
    if server.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "server: a server of this tenant only.")
    if scope == AccessRequest.Scope.AGENT:
        if agent is None:
            raise invalid_fields({"agent": ["an agent-scoped request names the agent."]})
        if agent.tenant_id != actor.tenant.pk:
            raise ServiceError(ErrorCode.INVALID, "agent: an agent of this tenant only.")
        user_id = ""
    elif scope == AccessRequest.Scope.USER:
        user_id = _check_user_id(user_id)
        agent = None
    else:
        raise invalid_fields({"scope": ["agent or user."]})
    message = validation.tool_list_error(tool_allow, nullable=True)
    if message:
        raise invalid_fields({"tool_allow": [message]})
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise invalid_fields({"reason": [f"at most {MAX_REASON} characters."]})
    req = AccessRequest.objects.create(
        tenant=actor.tenant,
        server=server,
        scope=scope,
        agent=agent,
        user_id=user_id,
        tool_allow=tool_allow,
        reason=reason,
        status=AccessRequest.Status.PENDING,
        requested_by=actor.label[:255],
        requester_kind=actor.kind,
        requester_id=actor.id[:64],
    )
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="mcp.request.created",
        target_type="mcp_access_request",
        target_id=str(req.pk),
        data=request_data(req),
    )
    return req


@transaction.atomic
def request_review(
    *,
    actor: Actor,
    request_id: Any,
    approved: bool,
    note: str = "",
    tool_allow: list[str] | None = None,
) -> AccessRequest:
    """Approve or reject a pending request in one transaction (B §3.4). Approval creates or updates the
    grant (enabled, with the request's tool_allow, or ``tool_allow`` given here, which may only narrow
    it). A request of another tenant or none at all is 404, one decided already 409; either way nothing
    changes. After commit the decision is published on ``mcp`` and to the requester's ``me`` topic."""
    if not isinstance(note, str) or len(note) > MAX_REASON:
        raise invalid_fields({"note": [f"at most {MAX_REASON} characters."]})
    if not approved and not note.strip():
        # The requester reads why: a rejection without a reason leaves them nothing to act on.
        raise invalid_fields({"note": ["Write a note saying why the request is rejected."]})
    try:
        request_id = uuid.UUID(str(request_id))
    except ValueError:
        raise ServiceError(ErrorCode.NOT_FOUND, "request not found", status=404) from None
    req = (
        AccessRequest.objects.for_tenant(actor.tenant)
        .select_for_update(of=("self",))
        .select_related("server", "agent")
        .filter(pk=request_id)
        .first()
    )
    if req is None:
        raise ServiceError(ErrorCode.NOT_FOUND, "request not found", status=404)
    if req.status != AccessRequest.Status.PENDING:
        raise Conflict(
            ErrorCode.CONFLICT,
            f"request not pending: it was {req.status} by {req.reviewed_by or 'someone'} already.",
        )
    granted = req.tool_allow
    if approved and tool_allow is not None:
        message = validation.tool_list_error(tool_allow, nullable=True)
        if message:
            raise invalid_fields({"tool_allow": [message]})
        outside = sorted(set(tool_allow) - set(req.tool_allow)) if req.tool_allow else []
        if outside:
            raise invalid_fields(
                {"tool_allow": [f"only tools the request asked for: {', '.join(outside[:5])}."]}
            )
        if not tool_allow:
            raise invalid_fields({"tool_allow": ["name at least one tool, or reject the request."]})
        granted = tool_allow
    req.status = AccessRequest.Status.APPROVED if approved else AccessRequest.Status.REJECTED
    req.reviewed_by = actor.label[:255]
    req.reviewed_at = timezone.now()
    req.review_note = note
    req.granted_tool_allow = granted if approved else None
    req.save(
        update_fields=[
            "status",
            "reviewed_by",
            "reviewed_at",
            "review_note",
            "granted_tool_allow",
            "updated_at",
        ]
    )
    data = request_data(req)
    grant: AgentGrant | UserGrant | None = None
    if approved:
        defaults = {
            "tenant": actor.tenant,
            "enabled": True,
            "tool_allow": granted,
            "granted_by": req.reviewed_by,
        }
        if req.scope == AccessRequest.Scope.AGENT and req.agent is not None:
            grant, _ = AgentGrant.objects.for_tenant(actor.tenant).update_or_create(
                server=req.server, agent=req.agent, defaults=defaults
            )
        elif req.scope == AccessRequest.Scope.USER and req.user_id:
            grant, _ = UserGrant.objects.for_tenant(actor.tenant).update_or_create(
                server=req.server, user_id=req.user_id, defaults=defaults
            )
        else:
            raise ServiceError(ErrorCode.INVALID, f"scope: cannot grant a request of scope {req.scope!r}.")
        config_changed(actor.tenant)
        data["grant"] = grant_data(grant)
    verb = "mcp.request.approved" if approved else "mcp.request.rejected"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type="mcp_access_request",
        target_id=str(req.pk),
        data=data,
    )
    events.publish_to_actor(
        tenant=actor.tenant,
        kind=req.requester_kind,
        actor_id=req.requester_id,
        type=verb,
        data=request_data(req),
    )
    return req


# --- per-user credentials -----------------------------------------------------------------------------


def credential_data(credential: UserCredential) -> dict[str, Any]:
    """What may be shown and audited of a user's credentials: which are set, never their values."""
    return {
        "id": str(credential.pk),
        "server": credential.server.name,
        "user_id": credential.user_id,
        "has_api_key": bool(credential.api_key),
        "headers": sorted(credential.headers),
        "env": sorted(credential.env),
    }


def _check_credentials(server: MCPServer, api_key: Any, headers: Any, env: Any) -> None:
    errors: dict[str, list[str]] = {}
    if api_key is not None and (
        not isinstance(api_key, str)
        or len(api_key) > validation.MAX_API_KEY
        or validation.LINE_BREAKS.search(api_key)
    ):
        errors["api_key"] = [f"a single-line string of at most {validation.MAX_API_KEY} characters."]
    if headers is not None:
        messages = validation.headers_errors(headers)
        if messages:
            errors["headers"] = messages
    if env is not None:
        messages = validation.env_errors(env)
        if server.transport != MCPServer.Transport.STDIO and env:
            messages = [f"a {server.transport} server has no env."]
        if messages:
            errors["env"] = messages
    if errors:
        raise invalid_fields(errors)


@transaction.atomic
def credential_set(
    *,
    actor: Actor,
    server: MCPServer,
    user_id: str,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> UserCredential:
    """Set ``user_id``'s own credentials for ``server`` (their calls then use a connection of their own).
    A value left ``None`` keeps what is stored (nothing, for new credentials); ``""`` / ``{}`` clears
    it; at least one must remain set. Validated like the server's own headers and env; the values are
    encrypted at rest and never audited or published, only which are set. Which tools are reachable
    does not change, so the tenant's configuration version stays."""
    if server.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "server: a server of this tenant only.")
    user_id = _check_user_id(user_id)
    _check_credentials(server, api_key, headers, env)
    credential = (
        UserCredential.objects.for_tenant(actor.tenant)
        .select_for_update()
        .filter(server=server, user_id=user_id)
        .first()
    )
    created = credential is None
    if credential is None:
        credential = UserCredential(tenant=actor.tenant, server=server, user_id=user_id)
    before = {"api_key": credential.api_key, "headers": credential.headers, "env": credential.env}
    if api_key is not None:
        credential.api_key = api_key
    if headers is not None:
        credential.headers = dict(headers)
    if env is not None:
        credential.env = dict(env)
    after = {"api_key": credential.api_key, "headers": credential.headers, "env": credential.env}
    if not any(after.values()):
        message = "set at least one of api_key, headers, env (DELETE removes the credentials)."
        raise ServiceError(ErrorCode.INVALID, message, details={"non_field_errors": [message]})
    if not created and after == before:
        return credential
    try:
        with transaction.atomic():
            credential.save()
    except IntegrityError:
        raise Conflict(ErrorCode.CONFLICT, f"Credentials of {user_id!r} were set meanwhile; retry.") from None
    data = credential_data(credential)
    data["changed"] = sorted(k for k in after if after[k] != before[k])
    verb = "mcp.user_credential.created" if created else "mcp.user_credential.updated"
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb=verb,
        target_type="mcp_user_credential",
        target_id=str(credential.pk),
        data=data,
    )
    return credential


@transaction.atomic
def credential_delete(*, actor: Actor, credential: UserCredential) -> None:
    """Remove a user's own credentials for a server (their calls use the server's again)."""
    data = credential_data(credential)
    deleted, _ = UserCredential.objects.for_tenant(actor.tenant).filter(pk=credential.pk).delete()
    if not deleted:
        raise ServiceError(ErrorCode.NOT_FOUND, "Credentials not found.", status=404)
    record_and_publish(
        actor=actor,
        topic=TOPIC,
        verb="mcp.user_credential.deleted",
        target_type="mcp_user_credential",
        target_id=data["id"],
        data=data,
    )
