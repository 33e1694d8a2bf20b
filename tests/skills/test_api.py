"""The skills API: /api/v1/skills/, /api/v1/skills/<id>/, /api/v1/skills/<id>/files/ and
/api/v1/skills/uses/."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.realtime import events
from apps.skills import loading, services
from apps.skills.models import Skill
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

LIST = "/api/v1/skills/"
USES = "/api/v1/skills/uses/"
SECRET = "the vault opens with 4711"


def skill_md(name: str, description: str = "Open the vault.", triggers: str = "vault", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntriggers: [{triggers}]\n---\n{body or SECRET}\n"


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def skills(tenant_a: Tenant, agent: Agent) -> dict[str, Skill]:
    system = Actor.system(tenant_a)
    vault = services.skill_create(actor=system, content=skill_md("vault"))
    notes = services.skill_create(
        actor=system,
        content=skill_md("release-notes", "Write release notes.", "changelog", "List the PRs."),
        enabled=False,
    )
    own, _ = services.skill_publish(
        actor=system,
        agent=agent,
        content=skill_md("vault", "Our own vault.", body="own steps"),
        files=[("steps.md", "step one"), ("scripts/open.sh", "echo open")],
        published_from="skills/vault",
    )
    return {"vault": vault, "notes": notes, "own": own}


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    """What was delivered on tenant A's ``skills`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "skills"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def test_the_list_shows_skills_without_content(viewer_a, skills, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        body = viewer_a.get(LIST).json()
    assert body["count"] == 3
    rows = [(row["name"], row["agent"], row["enabled"]) for row in body["results"]]
    assert rows == [("release-notes", None, False), ("vault", None, True), ("vault", "bot", True)]
    own = body["results"][2]
    assert own["files"] == 2
    assert own["source"] == "publish"
    assert own["published_from"] == "skills/vault"
    assert own["scope"] == "agent"
    assert own["triggers"] == ["vault"]
    assert own["size"] == len(skills["own"].content)
    assert "content" not in own
    assert SECRET not in str(body)


def test_the_list_filters_and_pages(viewer_a, skills):
    only_global = viewer_a.get(LIST, {"agent": "global"}).json()
    assert [row["agent"] for row in only_global["results"]] == [None, None]
    only_bot = viewer_a.get(LIST, {"agent": "bot"}).json()
    assert [row["description"] for row in only_bot["results"]] == ["Our own vault."]
    assert [r["name"] for r in viewer_a.get(LIST, {"q": "release"}).json()["results"]] == ["release-notes"]
    assert [r["name"] for r in viewer_a.get(LIST, {"q": "changelog"}).json()["results"]] == ["release-notes"]
    assert viewer_a.get(LIST, {"enabled": "false"}).json()["count"] == 1
    page = viewer_a.get(LIST, {"page_size": 2, "page": 2}).json()
    assert [r["agent"] for r in page["results"]] == ["bot"]
    error(viewer_a.get(LIST, {"agent": "nobody"}), 400, "invalid")
    error(viewer_a.get(LIST, {"page_size": 500}), 400, "invalid")
    error(viewer_a.get(LIST, {"colour": "red"}), 400, "invalid")


def test_one_skill_with_its_content_and_files(viewer_a, skills):
    own = skills["own"]
    body = viewer_a.get(f"{LIST}{own.pk}/").json()
    assert body["content"] == own.content
    assert body["version"] == 1
    files = viewer_a.get(f"{LIST}{own.pk}/files/").json()
    assert files == [
        {"path": "scripts/open.sh", "size": 9, "content": "echo open"},
        {"path": "steps.md", "size": 8, "content": "step one"},
    ]
    error(viewer_a.get(f"{LIST}00000000-0000-0000-0000-000000000000/"), 404, "not_found")


def test_create_from_a_skill_md_audits_and_publishes(
    admin_a, tenant_a, agent, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_a.post(LIST, {"content": skill_md("new-skill"), "agent": "bot"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["agent"], body["source"], body["triggers"]) == (
        "new-skill",
        "bot",
        "api",
        ["vault"],
    )
    assert body["content"] == skill_md("new-skill")
    assert body["created_by"].startswith("key ")
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="skill.created")
    assert event.target_id == body["id"]
    assert SECRET not in str(event.data)
    assert [(e["type"], e["data"]["name"]) for e in published()] == [("skill.created", "new-skill")]


def test_create_from_fields_builds_the_skill_md(admin_a):
    response = admin_a.post(
        LIST,
        {"name": "fields", "description": "From: fields.", "triggers": "a, b", "body": "# Steps\n"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["triggers"] == ["a", "b"]
    assert (
        body["content"]
        == "---\nname: fields\ndescription: 'From: fields.'\ntriggers:\n- a\n- b\n---\n# Steps\n"
    )


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"content": "no frontmatter"}, "content", "starts with a '---' line"),
        ({"content": skill_md("Bad Name")}, "name", "not a valid skill name"),
        ({"content": "---\nname: x\n---\n"}, "description", "description: missing"),
        ({"content": skill_md("x"), "name": "y"}, "content", "not both"),
        ({"name": "x"}, "description", "description: missing"),
        ({"description": "d"}, "name", "name: missing"),
        ({"name": "x", "description": "d", "triggers": [1]}, "triggers", "every trigger is a phrase"),
        ({"content": skill_md("x"), "agent": "nobody"}, "agent", "no agent"),
        ({"content": skill_md("x"), "enabled": "yes"}, "enabled", "true or false"),
        ({"content": 7}, "content", "Must be a string"),
        ({"content": "x" * 64_001}, "content", "64000"),
    ],
)
def test_what_is_not_a_skill_is_400_by_field(admin_a, tenant_a, agent, payload, field, words):
    before = tenant_state(tenant_a)
    envelope = error(admin_a.post(LIST, payload, format="json"), 400, "invalid")
    assert field in envelope["details"], envelope
    assert words in str(envelope), envelope
    assert tenant_state(tenant_a) == before


def test_a_name_taken_in_the_same_scope_is_409(admin_a, skills, tenant_a):
    before = tenant_state(tenant_a)
    envelope = error(
        admin_a.post(LIST, {"content": skill_md("vault")}, format="json"), 409, "duplicate_skill"
    )
    assert "exists already" in envelope["message"]
    error(
        admin_a.post(LIST, {"content": skill_md("vault"), "agent": "bot"}, format="json"),
        409,
        "duplicate_skill",
    )
    assert tenant_state(tenant_a) == before
    other = admin_a.post(LIST, {"content": skill_md("release-notes"), "agent": "bot"}, format="json")
    assert other.status_code == 201  # an agent's own may shadow a global one


def test_put_replaces_the_skill_md_and_raises_the_version(admin_a, skills, tenant_a):
    vault = skills["vault"]
    response = admin_a.put(
        f"{LIST}{vault.pk}/",
        {"content": skill_md("vault-two", "Changed.", "safe", "new body")},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["description"], body["triggers"], body["version"]) == (
        "vault-two",
        "Changed.",
        ["safe"],
        2,
    )
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="skill.updated")
    assert event.data["changed"] == ["content", "description", "name", "triggers"]
    same = admin_a.put(f"{LIST}{vault.pk}/", {"content": body["content"]}, format="json").json()
    assert same["version"] == 2  # nothing changed
    error(admin_a.put(f"{LIST}{vault.pk}/", {"enabled": False}, format="json"), 400, "invalid")
    taken = admin_a.put(f"{LIST}{vault.pk}/", {"content": skill_md("release-notes")}, format="json")
    error(taken, 409, "duplicate_skill")


def test_patch_changes_parts_and_keeps_other_frontmatter_keys(admin_a, tenant_a):
    created = admin_a.post(
        LIST, {"content": "---\nname: keep\ndescription: d\nlicense: MIT\n---\nold body\n"}, format="json"
    ).json()
    url = f"{LIST}{created['id']}/"
    body = admin_a.patch(url, {"body": "new body\n", "triggers": ["go live"]}, format="json").json()
    assert (
        body["content"]
        == "---\nname: keep\ndescription: d\nlicense: MIT\ntriggers:\n- go live\n---\nnew body\n"
    )
    assert body["version"] == 2


def test_patch_moves_enables_and_empties_triggers(admin_a, skills, agent):
    notes = skills["notes"]
    url = f"{LIST}{notes.pk}/"
    body = admin_a.patch(url, {"agent": "bot", "enabled": True, "triggers": []}, format="json").json()
    assert (body["agent"], body["enabled"], body["triggers"], body["version"]) == ("bot", True, [], 2)
    assert "triggers" not in body["content"]
    back = admin_a.patch(url, {"agent": None}, format="json").json()
    assert back["agent"] is None
    envelope = error(admin_a.patch(url, {"name": "Bad"}, format="json"), 400, "invalid")
    assert "name" in envelope["details"]
    error(admin_a.patch(url, {"body": "x", "content": skill_md("x")}, format="json"), 400, "invalid")


def test_delete_keeps_the_uses_by_name(admin_a, viewer_a, skills, tenant_a, agent):
    own = skills["own"]
    loading.activate_manual(
        actor=Actor.system(tenant_a), agent=agent, skill=own, user_id="u", session_key="s"
    )
    assert admin_a.delete(f"{LIST}{own.pk}/").status_code == 204
    assert not Skill.objects.for_tenant(tenant_a).filter(pk=own.pk).exists()
    uses = viewer_a.get(USES).json()
    assert [(u["skill"], u["skill_name"], u["how"]) for u in uses["results"]] == [(None, "vault", "manual")]
    assert (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="skill.deleted", target_id=str(own.pk)).exists()
    )


def test_uses_list_filters_and_pages(viewer_a, skills, tenant_a, agent, django_assert_max_num_queries):
    system = Actor.system(tenant_a)
    for session in ("s1", "s2", "s3"):
        loading.activate_manual(
            actor=system, agent=agent, skill=skills["own"], user_id="u", session_key=session
        )
    other = tenant_services.agent_create(actor=system, key="other", name="Other")
    loading.activate_manual(actor=system, agent=other, skill=skills["vault"], user_id="", session_key="x")
    with django_assert_max_num_queries(8):
        body = viewer_a.get(USES).json()
    assert body["count"] == 4
    assert body["results"][0]["agent"] == "other"  # newest first
    assert set(body["results"][0]) == {
        "id",
        "skill",
        "skill_name",
        "agent",
        "user_id",
        "session_key",
        "how",
        "at",
    }
    mine = viewer_a.get(USES, {"agent": "bot"}).json()
    assert [u["session_key"] for u in mine["results"]] == ["s3", "s2", "s1"]
    one = viewer_a.get(USES, {"skill": str(skills["vault"].pk)}).json()
    assert [u["agent"] for u in one["results"]] == ["other"]
    assert viewer_a.get(USES, {"page_size": 1, "page": 2}).json()["results"][0]["session_key"] == "s3"
    error(viewer_a.get(USES, {"skill": "not-a-uuid"}), 400, "invalid")
    error(viewer_a.get(USES, {"agent": "nobody"}), 400, "invalid")


@pytest.mark.parametrize(
    ("method", "suffix", "body", "least", "success"),
    [
        ("get", "", None, "viewer", 200),
        ("put", "", {"content": skill_md("vault", "Changed.")}, "admin", 200),
        ("patch", "", {"enabled": False}, "admin", 200),
        ("delete", "", None, "admin", 204),
        ("get", "files/", None, "viewer", 200),
    ],
)
def test_personas_on_one_skill(request, tenant_a, skills, method, suffix, body, least, success):
    check_personas(
        request,
        tenant_a,
        method=method,
        url=f"{LIST}{skills['vault'].pk}/{suffix}",
        body=body,
        least=least,
        success=success,
        outsider_status=404,
        never_shown_to_outsider=(SECRET,),
    )


@pytest.mark.parametrize(
    ("method", "url", "body", "least", "success"),
    [
        ("get", LIST, None, "viewer", 200),
        ("post", LIST, {"content": skill_md("persona-skill", body="persona steps")}, "admin", 201),
        ("get", USES, None, "viewer", 200),
    ],
)
def test_personas_on_the_collections(request, tenant_a, skills, method, url, body, least, success):
    expected = {"get": 200, "post": 201}[method]
    check_personas(
        request,
        tenant_a,
        method=method,
        url=url,
        body=body,
        least=least,
        success=success,
        outsider_status=expected,  # B's own (empty) list, or a skill of B's own
        never_shown_to_outsider=(SECRET, str(skills["vault"].pk)),
    )
