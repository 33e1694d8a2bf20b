"""Custom tools: the shell tools a tenant's administrators define at run time. Viewers and members read
them (env by variable names only, the command with the env values masked); administrators define,
change, enable, disable and delete them, and test-run one with sample arguments for an agent (the
service the REST test route uses: every step an agent's call takes, the scrubbed output, the rendered
command with secrets masked and the decision path).

Every tool is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.custom_tools.services`` (audited, published on the ``custom_tools`` topic,
raising the tenant's configuration version); a refusal is shown on the form with nothing saved.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.custom_tools import selectors, services
from apps.custom_tools.access import access_custom_tool
from apps.custom_tools.execution import mask
from apps.custom_tools.models import CustomTool
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error
from apps.dashboard.forms_tools import CustomToolForm, CustomToolTestForm
from apps.dashboard.views.confirm import confirm_action, set_enabled
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

MAX_TOOLS = 500
MAX_AGENTS = 1000
PLACEHOLDER = uuid.UUID(int=0)  # a tool's id in URL templates the page's script fills in


def _tool(request: DashboardRequest, id: uuid.UUID) -> CustomTool:
    return access_custom_tool(actor=request.actor, id=id)


def _agent_keys(request: DashboardRequest) -> list[str]:
    return list(agent_list(tenant=request.actor.tenant).values_list("key", flat=True)[:MAX_AGENTS])


def _agent(request: DashboardRequest, key: str) -> Agent | None:
    if not key:
        return None
    return agent_list(tenant=request.actor.tenant).filter(key=key).first()


def _tool_url(tool: CustomTool) -> str:
    return reverse("dashboard:custom_tool", args=[tool.pk])


def _place_scope_error(form: CustomToolForm, exc: ServiceError) -> None:
    """The services name the tool's agent ``agent``; the form calls it ``scope``."""
    if "agent" in exc.details:
        for message in exc.details["agent"]:
            form.add_error("scope", str(message))
        return
    add_service_error(form, exc)


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def tool_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's tools with their scope, state and timeout; changes made elsewhere show live for
    administrators (the ``custom_tools`` topic is theirs)."""
    tools = list(selectors.custom_tool_list(tenant=request.actor.tenant)[:MAX_TOOLS])
    is_admin = request.actor.can(Role.ADMIN)
    return render(
        request,
        "dashboard/custom_tools/list.html",
        {
            "tools": tools,
            "can_edit": is_admin,
            "live": is_admin,
            "live_config": {
                "topic": services.TOPIC,
                "prefix": "custom_tool.",
                "url": reverse("dashboard:custom_tool", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def tool_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One tool: its definition as agents get it, the command with secrets masked, env by names."""
    tool = _tool(request, id)
    shown = services.tool_data(tool)
    return render(
        request,
        "dashboard/custom_tools/detail.html",
        {
            "tool": tool,
            "shown": shown,
            "schema": json.dumps(shown["parameters"], indent=2, sort_keys=True),
            "can_edit": request.actor.can(Role.ADMIN),
        },
    )


@dashboard_view(Role.ADMIN)
def tool_create(request: DashboardRequest) -> HttpResponse:
    """Define a tool, global or one agent's."""
    form = CustomToolForm(request.POST if request.method == "POST" else None, agents=_agent_keys(request))
    if request.method == "POST" and form.is_valid():
        values = form.values()
        agent = _agent(request, values.pop("agent"))
        if form.cleaned_data.get("scope") and agent is None:
            form.add_error("scope", "Choose an agent of this tenant.")
        else:
            try:
                tool = services.custom_tool_create(actor=request.actor, agent=agent, **values)
            except ServiceError as exc:
                _place_scope_error(form, exc)
            else:
                messages.success(request, f"Custom tool {tool.name} defined.")
                return redirect(_tool_url(tool))
    return render(request, "dashboard/custom_tools/form.html", {"form": form, "tool": None})


@dashboard_view(Role.ADMIN)
def tool_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a tool. The env is write-only; the command is shown with the env values masked, and kept
    as stored when it comes back as shown."""
    tool = _tool(request, id)
    shown = services.tool_data(tool)
    form = CustomToolForm(
        request.POST if request.method == "POST" else None,
        agents=_agent_keys(request),
        env_names=shown["env"],
        shown_command=shown["command"],
        initial=CustomToolForm.initial_for(shown),
    )
    if request.method == "POST" and form.is_valid():
        values = form.values()
        agent = _agent(request, values.pop("agent"))
        if form.cleaned_data.get("scope") and agent is None:
            form.add_error("scope", "Choose an agent of this tenant.")
        else:
            try:
                services.custom_tool_update(actor=request.actor, tool=tool, agent=agent, **values)
            except ServiceError as exc:
                _place_scope_error(form, exc)
            else:
                messages.success(request, f"Custom tool {values['name']} saved.")
                return redirect(_tool_url(tool))
    return render(request, "dashboard/custom_tools/form.html", {"form": form, "tool": tool, "shown": shown})


@dashboard_view(Role.ADMIN, methods=("POST",))
def tool_enable(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a tool: a disabled one is no agent's."""
    tool = _tool(request, id)
    back = reverse("dashboard:custom_tools") if request.POST.get("next") == "list" else _tool_url(tool)
    return set_enabled(
        request,
        back=back,
        label=f"Custom tool {tool.name}",
        update=lambda on: services.custom_tool_update(actor=request.actor, tool=tool, enabled=on),
    )


@dashboard_view(Role.ADMIN)
def tool_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the tool (POST)."""
    tool = _tool(request, id)
    owner = f" of the agent {tool.agent.key}" if tool.agent is not None else ""

    def perform() -> tuple[str, str]:
        services.custom_tool_delete(actor=request.actor, tool=tool)
        return f"Custom tool {tool.name} deleted.", reverse("dashboard:custom_tools")

    return confirm_action(
        request,
        title=f"Delete the custom tool {tool.name}{owner}?",
        body="Agents lose it with their next call (a global tool of the same name takes its place for an "
        "agent's own). This cannot be undone.",
        action="Delete tool",
        back=_tool_url(tool),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def tool_test(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """The test-run page: sample arguments and an agent (an agent's own tool: its agent only). POST
    runs the tool once through every step an agent's call takes and shows the outcome here."""
    tool = _tool(request, id)
    agents = [tool.agent.key] if tool.agent is not None else _agent_keys(request)
    form = CustomToolTestForm(request.POST if request.method == "POST" else None, agents=agents)
    result: dict[str, Any] | None = None
    if request.method == "POST" and form.is_valid():
        agent = _agent(request, form.cleaned_data["agent"])
        try:
            result = services.custom_tool_test_run(
                actor=request.actor,
                tool=tool,
                agent=agent,
                args=form.cleaned_data["args"],
                user_id=form.cleaned_data["user_id"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            # The form shows the arguments again with the tool's env values masked.
            secrets = [value for value in tool.env.values() if value]
            form = CustomToolTestForm(
                agents=agents,
                initial={
                    "agent": form.cleaned_data["agent"],
                    "args": mask(
                        json.dumps(form.cleaned_data["args"], indent=2, ensure_ascii=False), secrets
                    ),
                    "user_id": form.cleaned_data["user_id"],
                },
            )
    return render(
        request,
        "dashboard/custom_tools/test.html",
        {"tool": tool, "shown": services.tool_data(tool), "form": form, "result": result},
    )
