"""Tenant-isolation cases for the skills routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.skills import loading, services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case

SECRET_BODY = "# Vault\n\nThe vault code is 4711."


def skill_md(name: str, description: str = "Open the vault.", triggers: str = "vault", body: str = "") -> str:
    return (
        f"---\nname: {name}\ndescription: {description}\ntriggers: [{triggers}]\n---\n{body or SECRET_BODY}\n"
    )


def make_skills(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """A global skill of ``tenant``, an agent with a published skill of its own (with a file), and a
    use of it in one conversation; returns the ids and the agent's key."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-skills-agent", name="Agent")
    shared = services.skill_create(actor=system, content=skill_md(f"{prefix}-vault"))
    own, _ = services.skill_publish(
        actor=system,
        agent=agent,
        content=skill_md(f"{prefix}-own", triggers="own vault"),
        files=[("notes/steps.md", "the secret steps")],
        published_from="skills/own",
    )
    loading.activate_manual(actor=system, agent=agent, skill=own, user_id="alice", session_key="s1")
    return {"skill": str(shared.pk), "agent_skill": str(own.pk), "agent": agent.key}


def _kwargs(**names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the objects and returns URL kwargs: ``kwarg=name in make_skills``."""

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_skills(tenant)
        return {kwarg: made[name] for kwarg, name in names.items()}

    return make


CASES: dict[str, Case] = {
    "skill-list": Case(make=_kwargs(pk="skill"), collection=True),
    "skill-use-list": Case(make=_kwargs(pk="agent_skill"), collection=True),
    "skill-detail": Case(
        make=_kwargs(pk="skill"),
        writes=[
            ("put", {"content": skill_md("hijacked")}),
            ("patch", {"enabled": False, "body": "hijacked"}),
            ("delete", None),
        ],
    ),
    "skill-files": Case(make=_kwargs(pk="agent_skill")),
    "agent-skill-context": Case(
        make=_kwargs(key="agent"),
        writes=[("post", {"session_key": "s1", "user_id": "alice", "turn": 99, "message": "open the vault"})],
    ),
}
