"""The skills pages of the dashboard through the Django test client: the list (filters, search), one
skill (its SKILL.md, files and recent uses), adding and editing one as SKILL.md text, enabling,
disabling and deleting one.

Personas (tests/dashboard/conftest.py): administrators and owners of tenant A use the pages; viewers
and members are refused (403); tenant B's owner, the outsider, gets 404 for A's skills with nothing
changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.skills import loading, services
from apps.skills.models import Skill
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.tenant_state import tenant_state
from tests.dashboard.conftest import admin, bot, member, outsider, owner, viewer  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "the vault opens with 4711"


def skill_md(
    name: str, description: str = "Open the vault.", triggers: str = "vault", body: str = SECRET
) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntriggers: [{triggers}]\n---\n{body}\n"


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


@pytest.fixture
def skills(tenant_a: Tenant, bot: Agent) -> dict[str, Skill]:  # noqa: F811
    system = Actor.system(tenant_a)
    vault = services.skill_create(actor=system, content=skill_md("vault"))
    notes = services.skill_create(
        actor=system, content=skill_md("release-notes", "Write release notes.", "changelog"), enabled=False
    )
    own, _ = services.skill_publish(
        actor=system,
        agent=bot,
        content=skill_md("deploy", "Deploy it.", "ship it", "own steps"),
        files=[("scripts/run.sh", "echo run")],
        published_from="skills/deploy",
    )
    loading.activate_manual(actor=system, agent=bot, skill=own, user_id="alice", session_key="chat-7")
    return {"vault": vault, "notes": notes, "own": own}


def test_the_list_shows_skills_and_filters(admin, skills):  # noqa: F811
    listed = page(admin.get(reverse("dashboard:skills")))
    for skill in skills.values():
        assert f'data-id="{skill.pk}"' in listed
    assert "agent <code>bot</code>" in listed
    assert "state-off" in listed
    assert SECRET not in listed
    assert '"topic": "skills"' in listed  # live updates on the skills topic
    only_global = page(admin.get(reverse("dashboard:skills"), {"agent": "global"}))
    assert 'data-name="deploy"' not in only_global
    assert 'data-name="vault"' in only_global
    only_bot = page(admin.get(reverse("dashboard:skills"), {"agent": "bot"}))
    assert 'data-name="deploy"' in only_bot
    assert 'data-name="vault"' not in only_bot
    searched = page(admin.get(reverse("dashboard:skills"), {"q": "changelog"}))
    assert 'data-name="release-notes"' in searched
    assert 'data-name="vault"' not in searched
    assert "No skills match these filters." in page(
        admin.get(reverse("dashboard:skills"), {"agent": "nobody"})
    )


def test_the_navigation_shows_skills_to_administrators_only(admin, viewer, skills):  # noqa: F811
    assert f'href="{reverse("dashboard:skills")}"' in page(admin.get(reverse("dashboard:home")))
    assert f'href="{reverse("dashboard:skills")}"' not in page(viewer.get(reverse("dashboard:home")))


def test_a_skill_page_shows_its_text_files_and_uses(admin, skills):  # noqa: F811
    detail = page(admin.get(reverse("dashboard:skill", args=[skills["own"].pk])))
    assert "own steps" in detail
    assert 'data-file="scripts/run.sh"' in detail
    assert "echo run" in detail
    assert "<code>chat-7</code>" in detail
    assert 'data-how="manual"' in detail
    assert "<code>skills/deploy</code>" in detail
    empty = page(admin.get(reverse("dashboard:skill", args=[skills["vault"].pk])))
    assert "data-no-files" in empty
    assert "data-no-uses" in empty


def test_an_admin_adds_a_skill_and_a_bad_one_keeps_the_text(admin, tenant_a, bot):  # noqa: F811
    form = page(admin.get(reverse("dashboard:skill_create")))
    assert "name: my-skill" in form  # a template to start from
    text = skill_md("new-skill", body="line one\r\nline two")
    added = admin.post(reverse("dashboard:skill_create"), {"agent": "bot", "content": text, "enabled": "on"})
    assert added.status_code == 302
    skill = Skill.objects.for_tenant(tenant_a).get(name="new-skill")
    assert added.url == reverse("dashboard:skill", args=[skill.pk])
    assert (skill.agent_id, skill.source, skill.enabled) == (bot.pk, "dashboard", True)
    assert "line one\nline two" in skill.content

    before = tenant_state(tenant_a)
    bad = "---\nname: Bad Name\ndescription: d\n---\nkeep this text"
    refused = admin.post(reverse("dashboard:skill_create"), {"agent": "", "content": bad})
    assert refused.status_code == 400
    shown = refused.content.decode()
    assert "is not a valid skill name" in shown
    assert "keep this text" in shown
    taken = admin.post(reverse("dashboard:skill_create"), {"agent": "bot", "content": text})
    assert taken.status_code == 400
    assert "exists already" in taken.content.decode()
    assert tenant_state(tenant_a) == before


def test_an_admin_edits_a_skill(owner, tenant_a, skills):  # noqa: F811
    vault = skills["vault"]
    url = reverse("dashboard:skill_edit", args=[vault.pk])
    assert "name: vault" in page(owner.get(url))
    saved = owner.post(url, {"agent": "", "content": skill_md("vault", "Changed."), "enabled": "on"})
    assert saved.status_code == 302
    vault.refresh_from_db()
    assert (vault.description, vault.version) == ("Changed.", 2)
    refused = owner.post(url, {"agent": "", "content": "no frontmatter at all"})
    assert refused.status_code == 400
    assert "starts with a &#x27;---&#x27; line" in refused.content.decode()
    vault.refresh_from_db()
    assert vault.version == 2


def test_enable_disable_and_delete_after_a_confirmation(admin, tenant_a, skills):  # noqa: F811
    notes = skills["notes"]
    enabled = admin.post(reverse("dashboard:skill_enable", args=[notes.pk]), {"enabled": "1", "next": "list"})
    assert enabled.url == reverse("dashboard:skills")
    notes.refresh_from_db()
    assert notes.enabled is True
    confirm = page(admin.get(reverse("dashboard:skill_delete", args=[notes.pk])))
    assert "Delete the skill release-notes?" in confirm
    assert Skill.objects.for_tenant(tenant_a).filter(pk=notes.pk).exists()
    deleted = admin.post(reverse("dashboard:skill_delete", args=[notes.pk]))
    assert deleted.url == reverse("dashboard:skills")
    assert not Skill.objects.for_tenant(tenant_a).filter(pk=notes.pk).exists()
    verbs = set(AuditEvent.objects.for_tenant(tenant_a).values_list("verb", flat=True))
    assert {"skill.updated", "skill.deleted"} <= verbs


def test_others_are_refused(viewer, member, outsider, tenant_a, skills):  # noqa: F811
    """Viewers and members get 403; the outsider gets 404 for A's skills with nothing changed."""
    vault = skills["vault"]
    before = tenant_state(tenant_a)
    for client in (viewer, member):
        assert client.get(reverse("dashboard:skills")).status_code == 403
        assert client.get(reverse("dashboard:skill", args=[vault.pk])).status_code == 403
        assert client.post(reverse("dashboard:skill_delete", args=[vault.pk])).status_code == 403
    for name in ("skill", "skill_edit", "skill_delete"):
        assert outsider.get(reverse(f"dashboard:{name}", args=[vault.pk])).status_code == 404
    assert (
        outsider.post(reverse("dashboard:skill_enable", args=[vault.pk]), {"enabled": "0"}).status_code == 404
    )
    assert outsider.post(reverse("dashboard:skill_delete", args=[vault.pk])).status_code == 404
    edit = reverse("dashboard:skill_edit", args=[vault.pk])
    assert outsider.post(edit, {"content": skill_md("vault", body="hijacked")}).status_code == 404
    listed = page(outsider.get(reverse("dashboard:skills")))
    assert str(vault.pk) not in listed
    assert tenant_state(tenant_a) == before
