"""MCP: the servers a tenant registers (viewers read; admins add, edit, enable, disable and delete them),
a server's discovered tools and its grants to agents and users (admins change them with a tool picker),
the access-request inbox where administrators approve or reject requests as they arrive, and "My access
requests", where members ask for access and see the decisions.

Every server, grant and request is found inside the tenant the page acts in: another tenant's is 404
whatever the method. Changes go through ``apps.mcp_grants.services`` (audited, published on the ``mcp``
topic); a refusal is shown on the form or as a message. Secrets (headers, env, the API key) are never
rendered: pages show which are set, and command, arguments and URL through the credential scrubber.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error
from apps.dashboard.forms_mcp import (
    AccessRequestForm,
    AgentGrantCreateForm,
    CredentialForm,
    GrantForm,
    ReviewForm,
    ServerCreateForm,
    ServerForm,
    UserGrantCreateForm,
)
from apps.dashboard.views.confirm import confirm_action, set_enabled
from apps.mcp_grants import naming, selectors, services
from apps.mcp_grants.access import access_request
from apps.mcp_grants.models import AccessRequest, AgentGrant, MCPServer, UserGrant
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

MAX_SERVERS = 500
MAX_TOOLS = 1000
MAX_GRANTS = 1000
MAX_PENDING = 200
RECENT_DECIDED = 50
MY_REQUESTS = 100
PLACEHOLDER = uuid.UUID(int=0)  # an item's id in URL templates the page's script fills in


# --- finding things -------------------------------------------------------------------------------------


def _server(request: DashboardRequest, id: uuid.UUID) -> MCPServer:
    server = selectors.server_list(tenant=request.actor.tenant).filter(pk=id).first()
    if server is None:
        raise Http404("No MCP server with this id.")
    return server


def _grant(
    request: DashboardRequest, server: MCPServer, kind: str, grant_id: uuid.UUID
) -> AgentGrant | UserGrant:
    grants = selectors.agent_grants if kind == "agent" else selectors.user_grants
    grant: AgentGrant | UserGrant | None = (
        grants(tenant=request.actor.tenant, server=server).filter(pk=grant_id).first()
    )
    if grant is None:
        raise Http404("No grant with this id on this server.")
    return grant


def _tool_names(server: MCPServer) -> list[str]:
    return list(
        selectors.server_tools(tenant=server.tenant, server=server).values_list("name", flat=True)[:MAX_TOOLS]
    )


def _agent_keys(request: DashboardRequest) -> list[str]:
    return list(agent_list(tenant=request.actor.tenant).values_list("key", flat=True)[:1000])


def _server_url(server: MCPServer) -> str:
    return reverse("dashboard:mcp_server", args=[server.pk])


def _refused(request: DashboardRequest, exc: ServiceError) -> None:
    messages.error(request, exc.message)


# --- servers --------------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def server_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's servers with their transport, state and tool count; their state changes live for
    administrators (the ``mcp`` topic is theirs)."""
    tenant = request.actor.tenant
    servers = list(selectors.server_list(tenant=tenant).annotate(tool_count=Count("tools"))[:MAX_SERVERS])
    is_admin = request.actor.can(Role.ADMIN)
    return render(
        request,
        "dashboard/mcp/servers.html",
        {
            "servers": servers,
            "can_edit": is_admin,
            "live": is_admin,
            "pending_count": selectors.pending_requests(tenant).count() if is_admin else 0,
            "live_config": {"server_url": reverse("dashboard:mcp_server", args=[PLACEHOLDER])},
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def server_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One server: its registration (secrets only as set or not), state, discovered tools with their
    registered names and schemas, and its grants."""
    server = _server(request, id)
    tenant = request.actor.tenant
    tools = [
        {
            "tool": tool,
            "registered": naming.registered_name(server, tool.name),
            "schema": json.dumps(tool.input_schema, indent=2, sort_keys=True),
        }
        for tool in selectors.server_tools(tenant=tenant, server=server)[:MAX_TOOLS]
    ]
    agent_grants = list(selectors.agent_grants(tenant=tenant, server=server)[:MAX_GRANTS])
    effects = selectors.grant_effects(tenant=tenant, grants=agent_grants)
    for grant in agent_grants:
        grant.effect = effects[grant.pk]  # type: ignore[attr-defined]
    user_grants = list(selectors.user_grants(tenant=tenant, server=server)[:MAX_GRANTS])
    is_admin = request.actor.can(Role.ADMIN)
    credentials = (
        list(selectors.credential_list(tenant=tenant, server=server)[:MAX_GRANTS]) if is_admin else []
    )
    return render(
        request,
        "dashboard/mcp/server.html",
        {
            "credentials": credentials,
            "server": server,
            "shown": services.server_data(server),
            "tools": tools,
            "agent_grants": agent_grants,
            "user_grants": user_grants,
            "can_edit": is_admin,
            "can_request": request.actor.can(Role.MEMBER),
            "live": is_admin,
            "live_config": {"server": str(server.pk)},
        },
    )


@dashboard_view(Role.ADMIN)
def server_create(request: DashboardRequest) -> HttpResponse:
    """Register a server."""
    form = ServerCreateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            server = services.server_create(
                actor=request.actor, name=form.cleaned_data["name"], **form.changes()
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"MCP server {server.name} registered.")
            return redirect("dashboard:mcp_server", id=server.pk)
    return render(request, "dashboard/mcp/server_form.html", {"form": form, "server": None})


@dashboard_view(Role.ADMIN)
def server_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a server's registration (never its name). Secrets are write-only."""
    server = _server(request, id)
    shown = services.server_data(server)
    form = ServerForm(
        request.POST if request.method == "POST" else None,
        server=server,
        shown=shown,
        initial=ServerForm.initial_for(server, shown),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.server_update(actor=request.actor, server=server, **form.changes())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"MCP server {server.name} saved.")
            return redirect("dashboard:mcp_server", id=server.pk)
    return render(
        request,
        "dashboard/mcp/server_form.html",
        {
            "form": form,
            "server": server,
            "secrets": {
                "env": sorted(server.env),
                "headers": sorted(server.headers),
                "api_key": bool(server.api_key),
            },
        },
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def server_enable(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a server: a disabled one gives no agent tools."""
    server = _server(request, id)
    back = reverse("dashboard:mcp_servers") if request.POST.get("next") == "list" else _server_url(server)
    return set_enabled(
        request,
        back=back,
        label=f"MCP server {server.name}",
        update=lambda on: services.server_update(actor=request.actor, server=server, enabled=on),
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def server_connect(request: DashboardRequest, id: uuid.UUID, store: bool) -> HttpResponse:
    """Test the connection (one fresh session: the tools found are shown) or, with ``store``, refresh
    the discovered tools and the state; the outcome is a message on the server's page."""
    server = _server(request, id)
    outcome = services.server_connect(actor=request.actor, server=server, store=store)
    if not outcome["ok"]:
        messages.error(request, f"Could not connect to {server.name}: {outcome['error']}")
        return redirect(_server_url(server))
    names = [t["name"] for t in outcome["tools"]]
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    done = "Tools refreshed" if store else "Connected"
    messages.success(
        request,
        f"{done}: {server.name} answered in {outcome['duration_ms']:.0f} ms with {len(names)} "
        f"tool{'s' if len(names) != 1 else ''}{': ' + shown if names else ''}.",
    )
    return redirect(_server_url(server))


@dashboard_view(Role.ADMIN)
def credential_edit(request: DashboardRequest, id: uuid.UUID, user_id: str | None = None) -> HttpResponse:
    """Set a user's own credentials for a server (``user_id`` None: for a user entered in the form).
    Write-only: the page shows which are stored, never their values."""
    server = _server(request, id)
    stored = None
    if user_id is not None:
        stored = (
            selectors.credential_list(tenant=request.actor.tenant, server=server)
            .filter(user_id=user_id)
            .first()
        )
        if stored is None:
            raise Http404("No credentials for this user.")
    form = CredentialForm(request.POST if request.method == "POST" else None, server=server, stored=stored)
    if request.method == "POST" and form.is_valid():
        who = user_id if user_id is not None else form.cleaned_data["user_id"]
        try:
            services.credential_set(actor=request.actor, server=server, user_id=who, **form.secret_changes())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Credentials of {who} for {server.name} saved.")
            return redirect(_server_url(server))
    return render(
        request,
        "dashboard/mcp/credential_form.html",
        {"form": form, "server": server, "user_id": user_id, "stored": stored},
    )


@dashboard_view(Role.ADMIN)
def credential_delete(request: DashboardRequest, id: uuid.UUID, user_id: str) -> HttpResponse:
    """Remove a user's own credentials (their calls use the server's again), after confirmation."""
    server = _server(request, id)
    stored = (
        selectors.credential_list(tenant=request.actor.tenant, server=server).filter(user_id=user_id).first()
    )
    if stored is None:
        raise Http404("No credentials for this user.")

    def perform() -> tuple[str, str]:
        services.credential_delete(actor=request.actor, credential=stored)
        return f"Credentials of {user_id} for {server.name} removed.", _server_url(server)

    return confirm_action(
        request,
        title=f"Remove {user_id}'s credentials for {server.name}?",
        body="Their calls will use the server's own credentials again.",
        action="Remove credentials",
        back=_server_url(server),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def server_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the server with its tools, grants and requests (POST)."""
    server = _server(request, id)

    def perform() -> tuple[str, str]:
        services.server_delete(actor=request.actor, server=server)
        return f"MCP server {server.name} deleted.", reverse("dashboard:mcp_servers")

    return confirm_action(
        request,
        title=f"Delete MCP server {server.name}?",
        body="Its tools disappear from every agent; its grants and access requests are deleted with it. "
        "This cannot be undone.",
        action="Delete server",
        back=_server_url(server),
        perform=perform,
    )


# --- grants ---------------------------------------------------------------------------------------------


def _picker_tools(server: MCPServer, *extra: list[str] | None) -> list[str]:
    """The server's discovered tools plus any other names a grant or request already holds."""
    names = set(_tool_names(server))
    for group in extra:
        names.update(group or [])
    return sorted(names)


def _set_grant(
    request: DashboardRequest, server: MCPServer, kind: str, target: Any, **values: Any
) -> AgentGrant | UserGrant:
    if kind == "agent":
        return services.agent_grant_set(actor=request.actor, server=server, agent=target, **values)
    return services.user_grant_set(actor=request.actor, server=server, user_id=target, **values)


def _grant_label(kind: str, grant: AgentGrant | UserGrant) -> str:
    return f"agent {grant.agent.key}" if isinstance(grant, AgentGrant) else f"user {grant.user_id}"


@dashboard_view(Role.ADMIN)
def grant_create(request: DashboardRequest, id: uuid.UUID, kind: str) -> HttpResponse:
    """Grant the server to an agent or to a user, with the tools picked."""
    server = _server(request, id)
    tools = _picker_tools(server)
    data = request.POST if request.method == "POST" else None
    tenant = request.actor.tenant
    form: AgentGrantCreateForm | UserGrantCreateForm
    if kind == "agent":
        granted = set(
            selectors.agent_grants(tenant=tenant, server=server).values_list("agent__key", flat=True)
        )
        agents = [k for k in _agent_keys(request) if k not in granted]
        form = AgentGrantCreateForm(data, tools=tools, agents=agents)
    else:
        form = UserGrantCreateForm(data, tools=tools)
    if request.method == "POST" and form.is_valid():
        target: Any
        if kind == "agent":
            target = agent_list(tenant=tenant).filter(key=form.cleaned_data["agent"]).first()
        else:
            target = form.cleaned_data["user_id"]
            if selectors.user_grants(tenant=tenant, server=server).filter(user_id=target).exists():
                form.add_error("user_id", "This user has a grant of this server already: edit it instead.")
                target = None
        if target is not None:
            try:
                grant = _set_grant(request, server, kind, target, **form.values())
            except ServiceError as exc:
                add_service_error(form, exc)
            else:
                messages.success(request, f"{server.name} granted to {_grant_label(kind, grant)}.")
                return redirect(_server_url(server))
        elif kind == "agent":
            form.add_error("agent", "Choose an agent of this tenant.")
    context = {"form": form, "server": server, "kind": kind, "grant": None}
    return render(request, "dashboard/mcp/grant_form.html", context)


@dashboard_view(Role.ADMIN)
def grant_edit(request: DashboardRequest, id: uuid.UUID, kind: str, grant_id: uuid.UUID) -> HttpResponse:
    """Change a grant's tools, state and configuration overrides."""
    server = _server(request, id)
    grant = _grant(request, server, kind, grant_id)
    form = GrantForm(
        request.POST if request.method == "POST" else None,
        tools=_picker_tools(server, grant.tool_allow, grant.tool_deny),
        initial=GrantForm.initial_for(grant),
    )
    if request.method == "POST" and form.is_valid():
        target = grant.agent if isinstance(grant, AgentGrant) else grant.user_id
        try:
            _set_grant(request, server, kind, target, **form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Grant of {server.name} to {_grant_label(kind, grant)} saved.")
            return redirect(_server_url(server))
    context = {"form": form, "server": server, "kind": kind, "grant": grant}
    return render(request, "dashboard/mcp/grant_form.html", context)


@dashboard_view(Role.ADMIN, methods=("POST",))
def grant_enable(request: DashboardRequest, id: uuid.UUID, kind: str, grant_id: uuid.UUID) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a grant; its tools stay as they are."""
    server = _server(request, id)
    grant = _grant(request, server, kind, grant_id)
    target = grant.agent if isinstance(grant, AgentGrant) else grant.user_id
    allow, deny = grant.filters()
    return set_enabled(
        request,
        back=_server_url(server),
        label=f"Grant of {server.name} to {_grant_label(kind, grant)}",
        update=lambda on: _set_grant(
            request,
            server,
            kind,
            target,
            enabled=on,
            tool_allow=allow,
            tool_deny=deny,
            resources=grant.resources,
            prompts=grant.prompts,
            config_overrides=grant.config_overrides,
        ),
    )


@dashboard_view(Role.ADMIN)
def grant_delete(request: DashboardRequest, id: uuid.UUID, kind: str, grant_id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the grant (POST)."""
    server = _server(request, id)
    grant = _grant(request, server, kind, grant_id)
    label = _grant_label(kind, grant)

    def perform() -> str:
        services.grant_delete(actor=request.actor, grant=grant)
        return f"Grant of {server.name} to {label} deleted."

    body = (
        f"The {label} loses the tools of {server.name}."
        if kind == "agent"
        else f"Without a grant, {label} gets whatever the agents' grants allow (a user grant only narrows)."
    )
    return confirm_action(
        request,
        title=f"Delete the grant of {server.name} to {label}?",
        body=body,
        action="Delete grant",
        back=_server_url(server),
        perform=perform,
    )


# --- access requests ------------------------------------------------------------------------------------


def _shown(req: AccessRequest) -> AccessRequest:
    """``req`` with ``shown_grant`` for an approved one: the tools granted (None: all) and the ones it
    asked for that were left out (``narrowed_from_all``: it asked for all tools, got only some)."""
    if req.status == AccessRequest.Status.APPROVED:
        granted = req.granted_tool_allow
        asked = req.tool_allow
        left_out = sorted(set(asked) - set(granted)) if asked is not None and granted is not None else []
        req.shown_grant = {  # type: ignore[attr-defined]
            "granted": granted,
            "left_out": left_out,
            "narrowed_from_all": asked is None and granted is not None,
        }
    return req


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def request_inbox(request: DashboardRequest) -> HttpResponse:
    """Pending requests, oldest first (new ones arrive live), then the latest decided ones."""
    tenant = request.actor.tenant
    pending = list(selectors.pending_requests(tenant)[:MAX_PENDING])
    decided = [
        _shown(req)
        for req in selectors.request_list(actor=request.actor)
        .exclude(status=AccessRequest.Status.PENDING)
        .order_by("-reviewed_at", "-created_at")[:RECENT_DECIDED]
    ]
    return render(
        request,
        "dashboard/mcp/requests.html",
        {
            "pending": pending,
            "decided": decided,
            "live": True,
            "live_config": {
                "review_url": reverse("dashboard:mcp_request_review", args=[PLACEHOLDER]),
                "server_url": reverse("dashboard:mcp_server", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.ADMIN)
def request_review(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """A request's review page (GET): approve with the tools it asked for or fewer, or reject with a
    note saying why (shown on a confirmation page first; the requester reads it). POST decides (from
    this page, or the inbox's quick approve, which grants what was asked)."""
    req = access_request(actor=request.actor, id=id)
    requested = list(req.tool_allow) if req.tool_allow is not None else None
    tools = _picker_tools(req.server) if requested is None else requested
    form = ReviewForm(
        request.POST if request.method == "POST" else None,
        requested=requested,
        tools=tools,
        initial=ReviewForm.initial_for(requested),
    )
    if request.method == "POST":
        if form.is_valid():
            approved = form.cleaned_data["decision"] == "approve"
            if not approved and not form.cleaned_data.get("confirmed"):
                # Nothing is decided yet: the rejection and its note are shown for confirmation.
                return render(
                    request,
                    "dashboard/mcp/reject_confirm.html",
                    {"req": _shown(req), "note": form.cleaned_data["note"].strip()},
                )
            try:
                services.request_review(
                    actor=request.actor,
                    request_id=req.pk,
                    approved=approved,
                    note=form.cleaned_data["note"].strip(),
                    tool_allow=form.granted() if approved else None,
                )
            except ServiceError as exc:
                if not form.cleaned_data.get("narrow"):
                    _refused(request, exc)
                    return redirect("dashboard:mcp_requests")
                add_service_error(form, exc)
            else:
                outcome = "approved" if approved else "rejected"
                messages.success(request, f"Request for {req.server.name} by {req.requested_by} {outcome}.")
                return redirect("dashboard:mcp_requests")
        elif not request.POST.get("narrow"):
            messages.error(request, "; ".join(str(e) for errors in form.errors.values() for e in errors))
            return redirect("dashboard:mcp_requests")
    return render(request, "dashboard/mcp/review.html", {"req": _shown(req), "form": form})


@dashboard_view(Role.MEMBER)
def my_requests(request: DashboardRequest) -> HttpResponse:
    """The acting user's own requests (decisions arrive live on their ``me`` topic) and a form to ask
    for access to a server (``?server=<id>`` picks it)."""
    tenant = request.actor.tenant
    servers = list(selectors.server_list(tenant=tenant)[:MAX_SERVERS])
    chosen: MCPServer | None = None
    raw = request.GET.get("server", "")
    if raw:
        try:
            chosen = _server(request, uuid.UUID(raw))
        except ValueError:
            raise Http404("No MCP server with this id.") from None
    form: AccessRequestForm | None = None
    if chosen is not None:
        initial = {"user_id": request.actor.label} if request.actor.kind == "user" else {}
        form = AccessRequestForm(
            request.POST if request.method == "POST" else None,
            tools=_tool_names(chosen),
            agents=_agent_keys(request),
            initial=initial,
        )
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            agent = None
            if data["scope"] == "agent":
                agent = agent_list(tenant=tenant).filter(key=data["agent"]).first()
            if data["scope"] == "agent" and agent is None:
                form.add_error("agent", "Choose an agent of this tenant.")
            else:
                try:
                    services.request_create(
                        actor=request.actor,
                        server=chosen,
                        scope=data["scope"],
                        agent=agent,
                        user_id=data["user_id"].strip() if data["scope"] == "user" else "",
                        tool_allow=form.allow(),
                        reason=data["reason"],
                    )
                except ServiceError as exc:
                    add_service_error(form, exc)
                else:
                    messages.success(request, f"Access to {chosen.name} requested: an administrator decides.")
                    return redirect("dashboard:mcp_my_requests")
    elif request.method == "POST":
        messages.error(request, "Choose the server to request access to first.")
        return redirect("dashboard:mcp_my_requests")
    # The actor's own requests, even for an administrator (who may see every request in the inbox).
    own = [
        _shown(req)
        for req in selectors.request_list(actor=request.actor).filter(
            requester_kind=request.actor.kind, requester_id=request.actor.id
        )[:MY_REQUESTS]
    ]
    return render(
        request,
        "dashboard/mcp/my_requests.html",
        {"servers": servers, "chosen": chosen, "form": form, "own": own, "live": True},
    )
