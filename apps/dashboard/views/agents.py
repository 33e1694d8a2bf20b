"""Agents: everyone reads; admins create, edit and delete."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from apps.accounts import services
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import AgentCreateForm, AgentForm, add_service_error
from apps.dashboard.runtime_display import policy_rows, setting_rows
from apps.dashboard.views.confirm import confirm_action
from apps.tenants import access, selectors
from apps.tenants.errors import ServiceError
from apps.tenants.roles import Role


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def agent_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's agents, optionally searched by key or name."""
    search = request.GET.get("q", "").strip()[:100]
    agents = selectors.agent_list(tenant=request.actor.tenant, search=search or None)
    return render(
        request,
        "dashboard/agents/list.html",
        {"agents": agents, "search": search, "can_edit": request.actor.can(Role.ADMIN)},
    )


@dashboard_view(Role.ADMIN)
def agent_create(request: DashboardRequest) -> HttpResponse:
    """Create an agent."""
    form = AgentCreateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            agent = services.agent_create(actor=request.actor, key=data["key"], **form.changes())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Agent {agent.key} created.")
            return redirect("dashboard:agents")
    return render(request, "dashboard/agents/form.html", {"form": form, "agent": None})


@dashboard_view(Role.ADMIN)
def agent_edit(request: DashboardRequest, key: str) -> HttpResponse:
    """Change an agent's name, description, type, provider, model or settings (never its key)."""
    agent = access.access_agent(actor=request.actor, key=key)
    secret_paths = selectors.agent_secret_paths(agent=agent)
    form = AgentForm(
        request.POST if request.method == "POST" else None,
        initial=AgentForm.initial_for(agent),
        secret_paths=secret_paths,
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.agent_update(actor=request.actor, agent=agent, changes=form.changes())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Agent {agent.key} saved.")
            return redirect("dashboard:agents")
    return render(
        request,
        "dashboard/agents/form.html",
        {
            "form": form,
            "agent": agent,
            # What is saved now (not the unsaved form): defaults < tenant < this agent's settings.
            "runtime_rows": setting_rows(
                request.actor.tenant.settings,
                agent.settings,
                secret_paths=selectors.setting_secret_paths(tenant=request.actor.tenant)
                | selectors.agent_secret_paths(agent=agent),
            ),
            "policy_rows": policy_rows(request.actor.tenant, agent),
        },
    )


@dashboard_view(Role.ADMIN)
def agent_delete(request: DashboardRequest, key: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete the agent (POST)."""
    agent = access.access_agent(actor=request.actor, key=key)

    def perform() -> str:
        services.agent_delete(actor=request.actor, agent=agent)
        return f"Agent {key} deleted."

    return confirm_action(
        request,
        title=f"Delete agent {agent.key}?",
        body="Agent loops using this key will stop getting tools. This cannot be undone.",
        action="Delete agent",
        back="dashboard:agents",
        perform=perform,
    )
