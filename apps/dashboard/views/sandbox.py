"""Where tenants' processes run: the jail's state (bubblewrap), the Docker engine's state, the tenant's
sandbox settings, one agent's overrides, and the tenant's containers with their resource use, which an
administrator may stop.

Administrators and owners only. The containers table follows the tenant's ``sandbox`` topic (a container
made or removed reloads it) and polls its own fragment every 10 seconds for the engine's figures.
Settings are saved through ``apps.sandbox.services`` (the tenants' services underneath:
validated, audited, the configuration version raised); a stop goes through a confirmation page and
``container_stop``. Another tenant's container is 404 whatever the method.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import SandboxSettingsForm, add_service_error
from apps.dashboard.views.confirm import confirm_action
from apps.sandbox import manager, selectors, services
from apps.sandbox.access import access_container
from apps.sandbox.models import SandboxContainer
from apps.tenants.access import access_agent
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list
from apps.toolkit import jail
from apps.toolkit.sandbox_config import allowed_images, default_image, host_allowed

MAX_AGENTS = 1000
BUILD_COMMANDS = (
    "docker build -t toolgate-sandbox:bookworm-slim deploy/sandbox",
    "python manage.py sandbox_image",
)


def _containers(request: DashboardRequest) -> list[dict[str, Any]]:
    """The tenant's containers (the first ``MAX_CONTAINERS``) with the engine's figures of their use."""
    now = timezone.now()
    rows = list(selectors.container_list(tenant=request.actor.tenant)[: selectors.MAX_CONTAINERS])
    return [{"row": row, "usage": manager.usage(row), "age": now - row.created_at} for row in rows]


def _page(request: DashboardRequest, form: SandboxSettingsForm) -> HttpResponse:
    tenant = request.actor.tenant
    engine = manager.engine_status()
    jail_status = jail.status()
    present = set(engine.get("images", []))
    agents = list(agent_list(tenant=tenant).only("key", "name", "settings")[:MAX_AGENTS])
    return render(
        request,
        "dashboard/sandbox/overview.html",
        {
            "engine": engine,
            "jail": jail_status.as_dict(),
            "host_allowed": host_allowed(),
            "images": [{"name": name, "present": name in present} for name in allowed_images()],
            "default_image": default_image(),
            "default_missing": engine.get("available") and default_image() not in present,
            "build_commands": BUILD_COMMANDS,
            "config": selectors.tenant_config(tenant),
            "form": form,
            "containers": _containers(request),
            "overrides": [
                (agent, selectors.stored(agent.settings)) for agent in agents if agent.settings.get("sandbox")
            ],
            "agents": agents,
            "live_config": {"topic": services.TOPIC},
        },
    )


@dashboard_view(Role.ADMIN)
def sandbox_overview(request: DashboardRequest) -> HttpResponse:
    """The engine, the tenant's settings form (POST saves it), the agents with overrides and the
    containers."""
    tenant = request.actor.tenant
    initial = SandboxSettingsForm.initial_for(selectors.tenant_config(tenant).as_dict())
    form = SandboxSettingsForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.sandbox_settings_update(actor=request.actor, values=form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, "Sandbox settings saved.")
            return redirect("dashboard:sandbox")
    return _page(request, form)


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def sandbox_containers(request: DashboardRequest) -> HttpResponse:
    """The containers table alone: what the page reloads live and every 10 seconds."""
    return render(request, "dashboard/sandbox/_containers.html", {"containers": _containers(request)})


def _container(request: DashboardRequest, id: uuid.UUID) -> SandboxContainer:
    return access_container(actor=request.actor, id=id)


@dashboard_view(Role.ADMIN)
def sandbox_container_stop(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then stop and remove the container (POST)."""
    row = _container(request, id)
    owner = f"the agent {row.agent.key}" if row.agent is not None else "every agent of the tenant"
    session = f", session {row.session_key}" if row.session_key else ""

    def perform() -> str:
        services.container_stop(actor=request.actor, row=row)
        return f"Container {row.name} stopped and removed."

    return confirm_action(
        request,
        title=f"Stop the sandbox container {row.name}?",
        body=f"It serves {owner} ({row.scope} scope{session}). A command running in it now is killed, "
        "and files outside the workspace (/tmp and the like) are lost; the next command gets a new "
        "container.",
        action="Stop container",
        back=reverse("dashboard:sandbox"),
        perform=perform,
    )


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def sandbox_agent_pick(request: DashboardRequest) -> HttpResponse:
    """The agent picker of the sandbox page: to the chosen agent's overrides."""
    key = request.GET.get("agent", "")
    if not key:
        messages.error(request, "Choose an agent.")
        return redirect("dashboard:sandbox")
    agent = agent_list(tenant=request.actor.tenant).filter(key=key[:64]).first()
    if agent is None:
        raise Http404("No agent with this key.")
    return redirect("dashboard:sandbox_agent", key=agent.key)


def _agent_page(request: DashboardRequest, agent: Agent, form: SandboxSettingsForm) -> HttpResponse:
    tenant = request.actor.tenant
    config = selectors.agent_config(tenant, agent)
    return render(
        request,
        "dashboard/sandbox/agent.html",
        {
            "agent": agent,
            "form": form,
            "overrides": selectors.stored(agent.settings),
            "config": config,
            "applies": config.applies_to(agent.key),
            "kind": config.kind_for(agent.key),
        },
    )


@dashboard_view(Role.ADMIN)
def sandbox_agent(request: DashboardRequest, key: str) -> HttpResponse:
    """One agent's sandbox keys: each inherits the tenant's or is set for the agent (POST saves them;
    the agent's other settings are kept)."""
    agent = access_agent(actor=request.actor, key=key)
    inherited = selectors.tenant_config(request.actor.tenant)
    initial = SandboxSettingsForm.initial_for(selectors.stored(agent.settings), agent=True)
    form = SandboxSettingsForm(
        request.POST if request.method == "POST" else None, inherited=inherited, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.agent_sandbox_update(actor=request.actor, agent=agent, values=form.values())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Sandbox settings of {agent.key} saved.")
            return redirect("dashboard:sandbox_agent", key=agent.key)
    return _agent_page(request, agent, form)
