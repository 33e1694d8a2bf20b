"""Credentialed CLIs: programs (gh, aws, kubectl …) agents run through ``exec`` with credentials Toolgate
injects and they never see. Viewers and members read the binaries (environments by variable names
only); administrators register them (blank, or from a preset that fills the form), change, enable,
disable and delete them, grant them to agents with overrides, set users' own credentials (write-only)
and test-run a binary as an agent would run it.

Every binary, grant and credential is found inside the tenant the page acts in: another tenant's is 404
whatever the method. Changes go through ``apps.secure_cli.services`` (audited, published on the
``secure_cli`` topic); a refusal is shown on the form with nothing saved.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error
from apps.dashboard.forms_tools import BinaryForm, BinaryTestForm, CredentialForm, GrantForm
from apps.dashboard.views.confirm import confirm_action, set_enabled
from apps.secure_cli import selectors, services
from apps.secure_cli.access import access_binary, access_credential, access_grant
from apps.secure_cli.models import SecureCLIBinary
from apps.secure_cli.presets import PRESETS
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

MAX_BINARIES = 500
MAX_GRANTS = 1000
MAX_AGENTS = 1000
PLACEHOLDER = uuid.UUID(int=0)  # a binary's id in URL templates the page's script fills in


def _binary(request: DashboardRequest, id: uuid.UUID) -> SecureCLIBinary:
    return access_binary(actor=request.actor, id=id)


def _agent_keys(request: DashboardRequest) -> list[str]:
    return list(agent_list(tenant=request.actor.tenant).values_list("key", flat=True)[:MAX_AGENTS])


def _binary_url(binary: SecureCLIBinary) -> str:
    return reverse("dashboard:secure_cli", args=[binary.pk])


# --- binaries ---------------------------------------------------------------------------------------------


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def binary_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's binaries with their reach, state, timeout and credential variables; changes made
    elsewhere show live for administrators (the ``secure_cli`` topic is theirs)."""
    binaries = [
        {"binary": b, "env": sorted(b.env)}
        for b in selectors.binary_list(tenant=request.actor.tenant)[:MAX_BINARIES]
    ]
    is_admin = request.actor.can(Role.ADMIN)
    return render(
        request,
        "dashboard/secure_cli/list.html",
        {
            "binaries": binaries,
            "presets": PRESETS.values(),
            "can_edit": is_admin,
            "live": is_admin,
            "live_config": {
                "topic": services.TOPIC,
                "prefix": "secure_cli.binary.",
                "url": reverse("dashboard:secure_cli", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def binary_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One binary: its settings, the variable names of its credentials and, for administrators, its
    agents' grants and users' own credentials (names only)."""
    binary = _binary(request, id)
    tenant = request.actor.tenant
    is_admin = request.actor.can(Role.ADMIN)
    grants: list[dict[str, Any]] = []
    credentials: list[dict[str, Any]] = []
    if is_admin:
        grants = [
            services.grant_data(g) for g in selectors.grant_list(tenant=tenant, binary=binary)[:MAX_GRANTS]
        ]
        credentials = [
            services.credential_data(c)
            for c in selectors.credential_list(tenant=tenant, binary=binary)[:MAX_GRANTS]
        ]
    return render(
        request,
        "dashboard/secure_cli/detail.html",
        {
            "binary": binary,
            "shown": services.binary_data(binary),
            "grants": grants,
            "credentials": credentials,
            "can_edit": is_admin,
        },
    )


@dashboard_view(Role.ADMIN)
def binary_create(request: DashboardRequest) -> HttpResponse:
    """Register a binary, blank or from a preset (``?preset=gh``: the form comes filled in)."""
    data = request.POST if request.method == "POST" else None
    chosen = (data or request.GET).get("preset", "")
    preset = PRESETS.get(chosen) if chosen else None
    if chosen and preset is None:
        raise Http404("No such preset.")
    initial = BinaryForm.initial_for(preset.as_dict()) if preset is not None else {}
    form = BinaryForm(data, preset=preset, initial=initial)
    if request.method == "POST" and form.is_valid():
        extra = {"preset": preset.name} if preset is not None else {}
        try:
            binary = services.binary_create(actor=request.actor, **extra, **form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Credentialed CLI {binary.binary_name} registered.")
            return redirect(_binary_url(binary))
    return render(
        request,
        "dashboard/secure_cli/form.html",
        {"form": form, "binary": None, "preset": preset, "presets": PRESETS.values()},
    )


@dashboard_view(Role.ADMIN)
def binary_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a binary's settings. Its credentials are write-only."""
    binary = _binary(request, id)
    shown = services.binary_data(binary)
    form = BinaryForm(
        request.POST if request.method == "POST" else None,
        env_names=shown["env"],
        initial=BinaryForm.initial_for(shown),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.binary_update(actor=request.actor, binary=binary, **form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Credentialed CLI {form.cleaned_data['binary_name']} saved.")
            return redirect(_binary_url(binary))
    return render(request, "dashboard/secure_cli/form.html", {"form": form, "binary": binary, "preset": None})


@dashboard_view(Role.ADMIN, methods=("POST",))
def binary_enable(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a binary: a disabled one reaches no agent."""
    binary = _binary(request, id)
    back = reverse("dashboard:secure_clis") if request.POST.get("next") == "list" else _binary_url(binary)
    return set_enabled(
        request,
        back=back,
        label=f"Credentialed CLI {binary.binary_name}",
        update=lambda on: services.binary_update(actor=request.actor, binary=binary, enabled=on),
    )


@dashboard_view(Role.ADMIN)
def binary_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the binary with its grants and users' credentials."""
    binary = _binary(request, id)

    def perform() -> tuple[str, str]:
        services.binary_delete(actor=request.actor, binary=binary)
        return f"Credentialed CLI {binary.binary_name} deleted.", reverse("dashboard:secure_clis")

    return confirm_action(
        request,
        title=f"Delete the credentialed CLI {binary.binary_name}?",
        body="Agents run it without credentials again (through the shell, under exec's rules); its "
        "grants and users' credentials are deleted with it. This cannot be undone.",
        action="Delete CLI",
        back=_binary_url(binary),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def binary_test(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """The test-run page: arguments and an agent. POST runs the binary as that agent would through
    ``exec`` and shows the output and the command with every credential masked, and each decision."""
    binary = _binary(request, id)
    form = BinaryTestForm(request.POST if request.method == "POST" else None, agents=_agent_keys(request))
    result: dict[str, Any] | None = None
    if request.method == "POST" and form.is_valid():
        agent = agent_list(tenant=request.actor.tenant).filter(key=form.cleaned_data["agent"]).first()
        if agent is None:
            form.add_error("agent", "Choose an agent of this tenant.")
        else:
            try:
                result = services.binary_test(
                    actor=request.actor,
                    binary=binary,
                    agent=agent,
                    args=form.cleaned_data["args"],
                    user_id=form.cleaned_data["user_id"],
                )
            except ServiceError as exc:
                add_service_error(form, exc)
            else:
                # The form shows the arguments as the command ran: credentials masked.
                masked = result["command"].removeprefix(shlex.quote(binary.binary_name)).lstrip()
                form = BinaryTestForm(
                    agents=_agent_keys(request),
                    initial={"agent": agent.key, "args": masked, "user_id": result["user_id"]},
                )
    return render(
        request, "dashboard/secure_cli/test.html", {"binary": binary, "form": form, "result": result}
    )


# --- agent grants -------------------------------------------------------------------------------------------


@dashboard_view(Role.ADMIN)
def grant_create(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Grant the binary to an agent, with overrides."""
    binary = _binary(request, id)
    tenant = request.actor.tenant
    granted = set(selectors.grant_list(tenant=tenant, binary=binary).values_list("agent__key", flat=True))
    agents = [key for key in _agent_keys(request) if key not in granted]
    form = GrantForm(request.POST if request.method == "POST" else None, agents=agents, env_names=None)
    if request.method == "POST" and form.is_valid():
        agent = agent_list(tenant=tenant).filter(key=form.cleaned_data["agent"]).first()
        if agent is None:
            form.add_error("agent", "Choose an agent of this tenant.")
        else:
            try:
                services.grant_set(actor=request.actor, binary=binary, agent=agent, **form.values())
            except ServiceError as exc:
                add_service_error(form, exc)
            else:
                messages.success(request, f"{binary.binary_name} granted to the agent {agent.key}.")
                return redirect(_binary_url(binary))
    return render(
        request, "dashboard/secure_cli/grant_form.html", {"form": form, "binary": binary, "grant": None}
    )


@dashboard_view(Role.ADMIN)
def grant_edit(request: DashboardRequest, id: uuid.UUID, key: str) -> HttpResponse:
    """Change an agent's grant: its state, overrides and write-only credentials."""
    binary = _binary(request, id)
    grant = access_grant(actor=request.actor, binary=binary, agent_key=key)
    shown = services.grant_data(grant)
    form = GrantForm(
        request.POST if request.method == "POST" else None,
        agents=None,
        env_names=shown["env"],
        initial=GrantForm.initial_for(shown),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.grant_set(actor=request.actor, binary=binary, agent=grant.agent, **form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Grant of {binary.binary_name} to the agent {key} saved.")
            return redirect(_binary_url(binary))
    return render(
        request, "dashboard/secure_cli/grant_form.html", {"form": form, "binary": binary, "grant": shown}
    )


@dashboard_view(Role.ADMIN)
def grant_delete(request: DashboardRequest, id: uuid.UUID, key: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete the grant (POST)."""
    binary = _binary(request, id)
    grant = access_grant(actor=request.actor, binary=binary, agent_key=key)

    def perform() -> str:
        services.grant_delete(actor=request.actor, grant=grant)
        return f"Grant of {binary.binary_name} to the agent {key} deleted."

    reach = (
        "It keeps reaching this global CLI, with the binary's settings."
        if binary.is_global
        else "It no longer reaches this restricted CLI."
    )
    return confirm_action(
        request,
        title=f"Delete the grant of {binary.binary_name} to the agent {key}?",
        body=f"The grant's overrides and credentials are deleted. {reach}",
        action="Delete grant",
        back=_binary_url(binary),
        perform=perform,
    )


# --- users' own credentials --------------------------------------------------------------------------------


@dashboard_view(Role.ADMIN)
def credential_edit(request: DashboardRequest, id: uuid.UUID, user_id: str | None = None) -> HttpResponse:
    """Set a user's own credentials (``user_id`` None: for a user entered in the form). Write-only: the
    page shows which variables are stored, never their values."""
    binary = _binary(request, id)
    stored = None
    if user_id is not None:
        stored = access_credential(actor=request.actor, binary=binary, user_id=user_id)
    form = CredentialForm(
        request.POST if request.method == "POST" else None,
        env_names=sorted(stored.env) if stored is not None else None,
    )
    if request.method == "POST" and form.is_valid():
        who = user_id if user_id is not None else form.cleaned_data["user_id"]
        try:
            services.credential_set(
                actor=request.actor, binary=binary, user_id=who, env=form.cleaned_data["env"]
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Credentials of {who} for {binary.binary_name} saved.")
            return redirect(_binary_url(binary))
    return render(
        request,
        "dashboard/secure_cli/credential_form.html",
        {"form": form, "binary": binary, "user_id": user_id},
    )


@dashboard_view(Role.ADMIN)
def credential_delete(request: DashboardRequest, id: uuid.UUID, user_id: str) -> HttpResponse:
    """Remove a user's own credentials (their calls use the binary's and the grant's), after
    confirmation."""
    binary = _binary(request, id)
    stored = access_credential(actor=request.actor, binary=binary, user_id=user_id)

    def perform() -> str:
        services.credential_delete(actor=request.actor, credential=stored)
        return f"Credentials of {user_id} for {binary.binary_name} removed."

    return confirm_action(
        request,
        title=f"Remove {user_id}'s credentials for {binary.binary_name}?",
        body="Their calls use the binary's and the grant's credentials again.",
        action="Remove credentials",
        back=_binary_url(binary),
        perform=perform,
    )
