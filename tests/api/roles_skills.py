"""Role cases for the skills routes (merged into ``test_roles``). URL templates may use the targets of
``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_skills import make_skills, skill_md

SKILLS = "/api/v1/skills/"
SKILL = SKILLS + "{skill}/"
CONTEXT = "/api/v1/agents/{skills_agent}/skills/context"

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", SKILLS, None, Role.VIEWER, 200),
    ("get", SKILLS + "?agent=global&q=vault&enabled=true", None, Role.VIEWER, 200),
    ("get", SKILLS + "?agent={skills_agent}", None, Role.VIEWER, 200),
    ("post", SKILLS, {"content": skill_md("new-skill")}, Role.ADMIN, 201),
    (
        "post",
        SKILLS,
        {"name": "fields-skill", "description": "From fields.", "triggers": ["x"], "agent": "target"},
        Role.ADMIN,
        201,
    ),
    ("get", SKILL, None, Role.VIEWER, 200),
    ("put", SKILL, {"content": skill_md("roles-vault", description="Changed.")}, Role.ADMIN, 200),
    ("patch", SKILL, {"enabled": False, "triggers": "safe, vault"}, Role.ADMIN, 200),
    ("delete", SKILL, None, Role.ADMIN, 204),
    ("get", SKILLS + "{skills_agent_skill}/files/", None, Role.VIEWER, 200),
    ("get", SKILLS + "uses/?agent={skills_agent}", None, Role.VIEWER, 200),
    (
        "post",
        CONTEXT,
        {"session_key": "s1", "user_id": "alice", "turn": 3, "message": "vault"},
        Role.MEMBER,
        200,
    ),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_skills(tenant, "roles")
    return {"skill": made["skill"], "skills_agent_skill": made["agent_skill"], "skills_agent": made["agent"]}
