"""Reads of skills, always within one tenant (one skill for a request: ``apps.skills.access``).

Resolution: an agent sees its own skills and the tenant's global ones; its own skill shadows a global
one of the same name. Disabled skills are invisible to tools (``visible_skills``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.db.models import Count, F, IntegerField, Q, QuerySet
from django.db.models.functions import Length

from apps.skills.models import Skill, SkillActivation, SkillFile, SkillUse

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

GLOBAL = "global"


def skill_list(
    *,
    tenant: Tenant,
    agent: Agent | None = None,
    only_global: bool = False,
    query: str = "",
    enabled: bool | None = None,
) -> QuerySet[Skill]:
    """The tenant's skills by name (global before an agent's of the same name), without their content;
    each with ``size`` (characters of SKILL.md) and ``file_count``. ``agent``: that agent's own skills;
    ``only_global``: the global ones; ``query``: in the name, description or triggers."""
    skills = Skill.objects.for_tenant(tenant).select_related("agent")
    if agent is not None:
        skills = skills.filter(agent_id=agent.pk)
    if only_global:
        skills = skills.filter(agent__isnull=True)
    if enabled is not None:
        skills = skills.filter(enabled=enabled)
    if query:
        skills = skills.filter(
            Q(name__icontains=query) | Q(description__icontains=query) | Q(triggers__icontains=query)
        )
    return (
        skills.annotate(
            size=Length("content", output_field=IntegerField()),
            file_count=Count("files", distinct=True),
        )
        .defer("content")
        .order_by("name", F("agent__key").asc(nulls_first=True), "id")
    )


def skill_files(*, tenant: Tenant, skill: Skill) -> QuerySet[SkillFile]:
    return SkillFile.objects.for_tenant(tenant).filter(skill_id=skill.pk).order_by("path")


def visible_skills(*, tenant: Tenant, agent: Agent) -> dict[str, Skill]:
    """The enabled skills ``agent`` has, by name: the global ones, each shadowed by the agent's own
    skill of the same name (an agent's disabled skill shadows nothing)."""
    rows = (
        Skill.objects.for_tenant(tenant)
        .filter(Q(agent__isnull=True) | Q(agent_id=agent.pk), enabled=True)
        .order_by(F("agent_id").asc(nulls_first=True), "name")
    )
    # Global rows come first, so an agent's own skill replaces the global one of its name.
    return {skill.name: skill for skill in rows}


def use_list(
    *, tenant: Tenant, skill_id: uuid.UUID | None = None, agent: Agent | None = None
) -> QuerySet[SkillUse]:
    """Uses of skills, newest first."""
    uses = SkillUse.objects.for_tenant(tenant).select_related("agent")
    if skill_id is not None:
        uses = uses.filter(skill_id=skill_id)
    if agent is not None:
        uses = uses.filter(agent_id=agent.pk)
    return uses.order_by("-at", "-id")


def activations(*, tenant: Tenant, agent: Agent, user_id: str, session_key: str) -> QuerySet[SkillActivation]:
    """The skills active in one conversation."""
    return SkillActivation.objects.for_tenant(tenant).filter(
        agent_id=agent.pk, user_id=user_id, session_key=session_key
    )
