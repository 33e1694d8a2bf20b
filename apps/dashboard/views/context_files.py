"""An agent's context files (SOUL.md, IDENTITY.md, AGENTS.md, TOOLS.md, HEARTBEAT.md, USER.md,
BOOTSTRAP.md): everyone reads them; administrators write and delete the agent's text, and delete a
user's copy. Pages say how the agent's tools reach each file (per user, shared, or predefined).

The agent is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.context_files.services`` (audited, published on the ``context_files`` topic).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.context_files import selectors, services
from apps.context_files.entries import agent_entry, user_entry
from apps.context_files.models import MAX_CONTENT_BYTES, MAX_USER_ID, NAMES
from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error
from apps.dashboard.views.confirm import confirm_action
from apps.tenants.access import access_agent
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role

MAX_USERS = 100  # users with copies listed on an agent's page


class ContextFileForm(forms.Form):
    content = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_CONTENT_BYTES,
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}),
        label="Content",
        help_text=f"Markdown, at most {MAX_CONTENT_BYTES // 1024} KiB.",
    )


def _file(request: DashboardRequest, key: str, name: str) -> Agent:
    """The tenant's agent, when ``name`` is a context file (404 otherwise, like another tenant's)."""
    agent = access_agent(actor=request.actor, key=key)
    if name not in NAMES:
        raise Http404(f"{name} is not a context file.")
    return agent


def _list_url(agent: Agent) -> str:
    return reverse("dashboard:context_files", args=[agent.key])


def _file_url(agent: Agent, name: str) -> str:
    return reverse("dashboard:context_file", args=[agent.key, name])


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def file_list(request: DashboardRequest, key: str) -> HttpResponse:
    """The seven files of an agent with their size and routing; ``?user=<id>``: that user's copies."""
    agent = access_agent(actor=request.actor, key=key)
    rows = selectors.agent_files(tenant=request.actor.tenant, agent=agent)
    user_id = request.GET.get("user", "").strip()
    user_error = ""
    copies = None
    bootstrap: dict[str, object] = {}
    if user_id:
        if len(user_id) > MAX_USER_ID or "\x00" in user_id:
            user_error = f"A user id is at most {MAX_USER_ID} characters."
            user_id = ""
        else:
            found = selectors.user_files(tenant=request.actor.tenant, agent=agent, user_id=user_id)
            copies = [user_entry(found[name]) for name in NAMES if name in found]
            completion = selectors.bootstrap_completion(
                tenant=request.actor.tenant, agent=agent, user_id=user_id
            )
            bootstrap = {
                "bootstrap_completed_at": completion.updated_at if completion is not None else None,
                "bootstrap_pending": selectors.bootstrap_pending(
                    tenant=request.actor.tenant, agent=agent, user_id=user_id
                ),
            }
    return render(
        request,
        "dashboard/context_files/list.html",
        {
            "agent": agent,
            "files": [agent_entry(agent, name, rows.get(name)) for name in NAMES],
            "user_id": user_id,
            "user_error": user_error,
            "copies": copies,
            "users": selectors.users_with_copies(tenant=request.actor.tenant, agent=agent, limit=MAX_USERS),
            "max_users": MAX_USERS,
            "can_edit": request.actor.can(Role.ADMIN),
            **bootstrap,
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def file_detail(request: DashboardRequest, key: str, name: str) -> HttpResponse:
    """One file: its text (an editor for administrators) and how the agent's tools reach it."""
    agent = _file(request, key, name)
    row = selectors.agent_file(tenant=request.actor.tenant, agent=agent, name=name)
    can_edit = request.actor.can(Role.ADMIN)
    form = ContextFileForm(initial={"content": row.content if row is not None else ""}) if can_edit else None
    return _detail(request, agent, name, form, status=200)


def _detail(
    request: DashboardRequest, agent: Agent, name: str, form: ContextFileForm | None, *, status: int
) -> HttpResponse:
    row = selectors.agent_file(tenant=request.actor.tenant, agent=agent, name=name)
    return render(
        request,
        "dashboard/context_files/detail.html",
        {
            "agent": agent,
            "file": agent_entry(agent, name, row),
            "form": form,
            "can_edit": request.actor.can(Role.ADMIN),
        },
        status=status,
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def file_save(request: DashboardRequest, key: str, name: str) -> HttpResponse:
    """Save the agent's text of one file; a refusal shows on the form with nothing saved."""
    agent = _file(request, key, name)
    form = ContextFileForm(request.POST)
    if form.is_valid():
        try:
            row = services.agent_file_save(
                actor=request.actor,
                agent=agent,
                name=name,
                content=form.cleaned_data["content"].replace("\r\n", "\n"),
                via="dashboard",
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"{name} of {agent.key} saved ({services.size_of(row.content)} bytes).")
            return redirect(_file_url(agent, name))
    return _detail(request, agent, name, form, status=400)


@dashboard_view(Role.ADMIN)
def file_delete(request: DashboardRequest, key: str, name: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete the agent's text of one file (POST)."""
    agent = _file(request, key, name)

    def perform() -> tuple[str, str]:
        services.agent_file_delete(actor=request.actor, agent=agent, name=name, via="dashboard")
        return f"{name} of {agent.key} deleted.", _list_url(agent)

    per_user = agent.type == Agent.Type.OPEN or name in ("USER.md", "BOOTSTRAP.md")
    return confirm_action(
        request,
        title=f"Delete {name} of the agent {agent.key}?",
        body=(
            "Users without a copy of their own will find no such file; their own copies stay."
            if per_user
            else "The agent loses this text. This cannot be undone."
        ),
        action=f"Delete {name}",
        back=_file_url(agent, name),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def user_file_delete(request: DashboardRequest, key: str, user_id: str, name: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete one user's copy of a file (POST)."""
    agent = _file(request, key, name)
    back = f"{_list_url(agent)}?{urlencode({'user': user_id})}"
    if len(user_id) > MAX_USER_ID:
        raise Http404("No such user id.")

    def perform() -> tuple[str, str]:
        if not services.user_file_delete(
            actor=request.actor, agent=agent, user_id=user_id, name=name, via="dashboard"
        ):
            return f"The user {user_id} has no copy of {name}.", back
        return f"{name} of the user {user_id} deleted.", back

    return confirm_action(
        request,
        title=f"Delete the copy of {name} that the user {user_id} has?",
        body="The user then reads the agent's text again. This cannot be undone.",
        action="Delete the copy",
        back=back,
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def bootstrap_reset(request: DashboardRequest, key: str, user_id: str) -> HttpResponse:
    """Ask for confirmation (GET), then forget that a user completed the first run (POST)."""
    agent = access_agent(actor=request.actor, key=key)
    if len(user_id) > MAX_USER_ID:
        raise Http404("No such user id.")
    back = f"{_list_url(agent)}?{urlencode({'user': user_id})}"

    def perform() -> tuple[str, str]:
        if not services.bootstrap_reset(actor=request.actor, agent=agent, user_id=user_id, via="dashboard"):
            return f"The user {user_id} has no completed first run.", back
        return f"The first run of the user {user_id} is reset.", back

    return confirm_action(
        request,
        title=f"Reset the first run of the user {user_id}?",
        body="The user reads the agent's BOOTSTRAP.md again, and the agent runs its first-run "
        "instructions with them anew.",
        action="Reset the first run",
        back=back,
        perform=perform,
    )
