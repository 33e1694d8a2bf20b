"""Skills: the SKILL.md documents agents load with use_skill (global to the tenant, or one agent's own).
Administrators list and search them, add and edit them as SKILL.md text, enable, disable and delete
them, and see a skill's files and recent uses.

Every skill is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.skills.services`` (audited, published on the ``skills`` topic); a refused
SKILL.md is shown on the form with the text as it was typed, nothing saved.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.views.confirm import confirm_action, set_enabled
from apps.skills import selectors, services
from apps.skills.access import access_skill
from apps.skills.models import MAX_CONTENT_CHARS, Skill
from apps.skills.parsing import EXAMPLE
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role
from apps.tenants.selectors import agent_list

PAGE_SIZE = 50
MAX_AGENTS = 1000
RECENT_USES = 20
PLACEHOLDER = uuid.UUID(int=0)  # a skill's id in URL templates the page's script fills in
GLOBAL = selectors.GLOBAL
TEMPLATE = EXAMPLE + "# My skill\n\nStep-by-step instructions for the agent.\n"


class SkillForm(forms.Form):
    agent = forms.ChoiceField(
        required=False,
        label="Belongs to",
        help_text="Global skills are every agent's; an agent's own skill shadows a global one of the "
        "same name.",
    )
    content = forms.CharField(
        strip=False,
        max_length=MAX_CONTENT_CHARS,
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}),
        label="SKILL.md",
        help_text="YAML frontmatter between '---' lines (name, description, triggers), then the "
        "instructions.",
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled")

    def __init__(self, *args: Any, agents: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "Global: every agent"), *((key, f"Agent {key}") for key in agents)]
        self.fields["agent"].choices = choices  # type: ignore[attr-defined]

    def add_service_error(self, exc: ServiceError) -> None:
        """A refusal by field: the agent's on ``agent``; whatever the SKILL.md decides (its name,
        description, triggers) on ``content``, with the whole message."""
        on_content = False
        for field, problems in exc.details.items():
            if field in ("agent", "enabled"):
                for problem in problems if isinstance(problems, list) else [problems]:
                    self.add_error(field, str(problem))
            elif not on_content:
                self.add_error("content", exc.message)
                on_content = True
        if not exc.details:
            self.add_error(None, exc.message)


def _agent_keys(request: DashboardRequest) -> list[str]:
    return list(agent_list(tenant=request.actor.tenant).values_list("key", flat=True)[:MAX_AGENTS])


def _agent(request: DashboardRequest, key: str) -> Agent | None:
    if not key:
        return None
    return agent_list(tenant=request.actor.tenant).filter(key=key).first()


def _skill(request: DashboardRequest, id: uuid.UUID) -> Skill:
    return access_skill(tenant=request.actor.tenant, id=id)


def _skill_url(skill: Skill) -> str:
    return reverse("dashboard:skill", args=[skill.pk])


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def skill_list(request: DashboardRequest) -> HttpResponse:
    """The tenant's skills by name; ``?agent=`` "global" or an agent's key, ``?q=`` in the name,
    description or triggers. Changes made elsewhere show live (the ``skills`` topic)."""
    tenant = request.actor.tenant
    keys = _agent_keys(request)
    scope = request.GET.get("agent", "").strip()[:64]
    query = request.GET.get("q", "").strip()[:200]
    agent = _agent(request, scope) if scope and scope != GLOBAL else None
    unknown = bool(scope) and scope != GLOBAL and agent is None
    skills = (
        selectors.skill_list(tenant=tenant, agent=agent, only_global=scope == GLOBAL, query=query)
        if not unknown
        else selectors.skill_list(tenant=tenant).none()
    )
    page = Paginator(skills, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboard/skills/list.html",
        {
            "page": page,
            "agents": keys,
            "scope": scope,
            "query": query,
            "filtered": bool(scope or query),
            "live_config": {
                "topic": services.TOPIC,
                "prefix": "skill.",
                "url": reverse("dashboard:skill", args=[PLACEHOLDER]),
            },
        },
    )


@dashboard_view(Role.ADMIN, methods=READ_ONLY)
def skill_detail(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """One skill: its SKILL.md, its files and its recent uses."""
    skill = _skill(request, id)
    tenant = request.actor.tenant
    uses = list(selectors.use_list(tenant=tenant, skill_id=skill.pk)[:RECENT_USES])
    return render(
        request,
        "dashboard/skills/detail.html",
        {
            "skill": skill,
            "files": list(selectors.skill_files(tenant=tenant, skill=skill)),
            "uses": uses,
            "recent": RECENT_USES,
        },
    )


@dashboard_view(Role.ADMIN)
def skill_create(request: DashboardRequest) -> HttpResponse:
    """Add a skill from its SKILL.md, global or one agent's."""
    keys = _agent_keys(request)
    if request.method != "POST":
        form = SkillForm(agents=keys, initial={"content": TEMPLATE, "enabled": True})
        return render(request, "dashboard/skills/form.html", {"form": form, "skill": None})
    form = SkillForm(request.POST, agents=keys)
    if form.is_valid():
        try:
            skill = services.skill_create(
                actor=request.actor,
                content=form.cleaned_data["content"].replace("\r\n", "\n"),
                agent=_agent(request, form.cleaned_data["agent"]),
                enabled=form.cleaned_data["enabled"],
                source=Skill.Source.DASHBOARD,
            )
        except ServiceError as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, f"Skill {skill.name} added.")
            return redirect(_skill_url(skill))
    return render(request, "dashboard/skills/form.html", {"form": form, "skill": None}, status=400)


@dashboard_view(Role.ADMIN)
def skill_edit(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Change a skill's SKILL.md, owner or state; every change of the text raises its version."""
    skill = _skill(request, id)
    keys = _agent_keys(request)
    if request.method != "POST":
        initial = {
            "agent": skill.agent.key if skill.agent is not None else "",
            "content": skill.content,
            "enabled": skill.enabled,
        }
        form = SkillForm(agents=keys, initial=initial)
        return render(request, "dashboard/skills/form.html", {"form": form, "skill": skill})
    form = SkillForm(request.POST, agents=keys)
    if form.is_valid():
        try:
            services.skill_update(
                actor=request.actor,
                skill=skill,
                content=form.cleaned_data["content"].replace("\r\n", "\n"),
                enabled=form.cleaned_data["enabled"],
                agent=_agent(request, form.cleaned_data["agent"]),
            )
        except ServiceError as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, f"Skill {skill.name} saved.")
            return redirect(_skill_url(skill))
    return render(request, "dashboard/skills/form.html", {"form": form, "skill": skill}, status=400)


@dashboard_view(Role.ADMIN, methods=("POST",))
def skill_enable(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a skill: a disabled one is invisible to tools."""
    skill = _skill(request, id)
    back = reverse("dashboard:skills") if request.POST.get("next") == "list" else _skill_url(skill)
    return set_enabled(
        request,
        back=back,
        label=f"Skill {skill.name}",
        update=lambda on: services.skill_update(actor=request.actor, skill=skill, enabled=on),
    )


@dashboard_view(Role.ADMIN)
def skill_delete(request: DashboardRequest, id: uuid.UUID) -> HttpResponse:
    """Ask for confirmation (GET), then delete the skill with its files (POST)."""
    skill = _skill(request, id)
    owner = f" of the agent {skill.agent.key}" if skill.agent is not None else ""

    def perform() -> tuple[str, str]:
        services.skill_delete(actor=request.actor, skill=skill)
        return f"Skill {skill.name} deleted.", reverse("dashboard:skills")

    return confirm_action(
        request,
        title=f"Delete the skill {skill.name}{owner}?",
        body="Agents no longer find or load it, and it leaves the conversations it is active in (its "
        "uses stay listed by name). This cannot be undone.",
        action="Delete skill",
        back=_skill_url(skill),
        perform=perform,
    )
