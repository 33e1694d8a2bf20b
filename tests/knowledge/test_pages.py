"""The knowledge pages of the dashboard through the Django test client: an agent's entities (type filter,
words, users), one entity with its relations both ways, creating, editing and deleting entities, adding
and deleting relations after a confirmation.

Personas (tests/dashboard/conftest.py): a viewer and a member of tenant A read; an admin and an owner
change; tenant B's owner, the outsider, gets 404 for A's agent with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.knowledge.models import Entity, Relation
from apps.tenants.models import Agent
from tests.api.tenant_state import tenant_state
from tests.dashboard.conftest import admin, member, outsider, owner, viewer  # noqa: F401
from tests.knowledge.support import ref, relation, upsert

pytestmark = pytest.mark.django_db

SECRET = "keeps the vault code 4711"


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def url(name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=["bot", *args])


@pytest.fixture
def graph(tenant_a, agent: Agent) -> dict[tuple[str, str], Entity]:
    made = upsert(
        tenant_a,
        agent,
        [
            {"type": "person", "name": "Ada Lovelace", "aliases": ["Ada"], "description": SECRET},
            {"type": "organization", "name": "Acme Corp", "properties": {"founded": 1949}},
            {"type": "project", "name": "Apollo", "description": "The billing engine."},
        ],
        [
            relation(ref("person", "Ada Lovelace"), "works_at", ref("organization", "Acme Corp"), weight=0.9),
            relation(ref("person", "Ada Lovelace"), "leads", ref("project", "Apollo")),
        ],
    )
    upsert(tenant_a, agent, [{"type": "person", "name": "Alice's Dentist"}], user_id="alice")
    return made


def test_the_list_shows_entities_and_filters(viewer, graph):  # noqa: F811
    page = body(viewer.get(url("knowledge")))
    for name in ("Ada Lovelace", "Acme Corp", "Apollo", "Alice&#x27;s Dentist"):
        assert name in page
    assert 'data-type="organization"' in page
    assert "New entity" not in page  # viewers only read
    assert "knowledge-live.js" not in page  # the live topic is administrators'
    people = body(viewer.get(url("knowledge"), {"type": "person"}))
    assert "Acme Corp" not in people.split("data-knowledge-entities")[1]
    assert "Ada Lovelace" in people
    words = body(viewer.get(url("knowledge"), {"q": "billing"}))
    assert "Apollo" in words
    assert "Ada Lovelace" not in words.split("data-knowledge-entities")[1]
    shared = body(viewer.get(url("knowledge"), {"user": "-"}))
    assert "Dentist" not in shared.split("data-knowledge-entities")[1]
    alice = body(viewer.get(url("knowledge"), {"user": "alice"}))
    assert "Ada Lovelace" not in alice.split("data-knowledge-entities")[1]
    nothing = body(viewer.get(url("knowledge"), {"q": "zebra"}))
    assert "No entities match these filters" in nothing
    assert body(viewer.get(url("knowledge"), {"type": "!!"}))  # an impossible type is no filter


def test_an_entity_page_shows_its_relations_both_ways(viewer, admin, graph):  # noqa: F811
    acme = graph[("organization", "Acme Corp")]
    page = body(viewer.get(url("knowledge_entity", acme.pk)))
    assert "Relations to Acme Corp (1)" in page
    assert "Ada Lovelace" in page
    assert "works_at" in page
    assert "0.9" in page
    assert "Relations from Acme Corp (0)" in page
    assert "founded" in page
    assert "Delete…" not in page
    assert "Add a relation" not in page
    ada = body(viewer.get(url("knowledge_entity", graph[("person", "Ada Lovelace")].pk)))
    assert SECRET in ada
    assert "Also known as: Ada" in ada
    assert "Relations from Ada Lovelace (2)" in ada
    editor = body(admin.get(url("knowledge_entity", acme.pk)))
    assert "Delete…" in editor
    assert "Add a relation" in editor
    assert "knowledge-live.js" in editor
    assert viewer.get(url("knowledge_entity", "00000000-0000-0000-0000-000000000000")).status_code == 404
    assert viewer.get(url("knowledge_entity", "nope")).status_code == 404


def test_an_admin_creates_and_merges_an_entity(admin, tenant_a, graph):  # noqa: F811
    created = admin.post(
        url("knowledge_entity_create"),
        {
            "name": "Grace Hopper",
            "type": "Person",
            "description": "Compilers.",
            "aliases": "Grace\n\nAmazing Grace",
            "properties": '{"born": 1906}',
        },
    )
    assert created.status_code == 302
    grace = Entity.objects.for_tenant(tenant_a).get(name="Grace Hopper")
    assert created.url == url("knowledge_entity", grace.pk)
    assert (grace.entity_type, grace.aliases, grace.properties, grace.source) == (
        "person",
        ["Grace", "Amazing Grace"],
        {"born": 1906},
        "dashboard",
    )
    merged = admin.post(
        url("knowledge_entity_create"),
        {"name": "grace hopper", "type": "person", "properties": '{"navy": true}'},
    )
    assert merged.status_code == 302
    grace.refresh_from_db()
    assert grace.properties == {"born": 1906, "navy": True}
    assert grace.description == "Compilers."  # left empty: kept
    assert Entity.objects.for_tenant(tenant_a).filter(name_key="grace hopper").count() == 1


def test_a_refused_entity_shows_on_the_form_with_nothing_saved(admin, tenant_a, graph):  # noqa: F811
    before = tenant_state(tenant_a)
    bad_json = admin.post(
        url("knowledge_entity_create"), {"name": "X", "type": "person", "properties": "{nope"}
    )
    assert bad_json.status_code == 400
    assert "Not valid JSON" in bad_json.content.decode()
    bad_type = admin.post(url("knowledge_entity_create"), {"name": "X", "type": "9 lives"})
    assert bad_type.status_code == 400
    assert "is not a type" in bad_type.content.decode()
    too_many = admin.post(
        url("knowledge_entity_create"),
        {"name": "X", "type": "person", "aliases": "\n".join(f"a{i}" for i in range(21))},
    )
    assert "at most 20 aliases" in too_many.content.decode()
    assert tenant_state(tenant_a) == before


def test_an_admin_edits_an_entity_and_a_clash_is_refused(admin, tenant_a, graph):  # noqa: F811
    apollo = graph[("project", "Apollo")]
    saved = admin.post(
        url("knowledge_entity_edit", apollo.pk),
        {
            "name": "Apollo 2",
            "type": "project",
            "description": "Billing, again.",
            "aliases": "",
            "properties": "",
        },
    )
    assert saved.status_code == 302
    apollo.refresh_from_db()
    assert (apollo.name, apollo.description, apollo.aliases) == ("Apollo 2", "Billing, again.", [])
    before = tenant_state(tenant_a)
    clash = admin.post(url("knowledge_entity_edit", apollo.pk), {"name": "Acme Corp", "type": "organization"})
    assert clash.status_code == 400
    assert "already has organization &#x27;Acme Corp&#x27;" in clash.content.decode()
    assert tenant_state(tenant_a) == before


def test_an_admin_adds_relations_both_ways(admin, tenant_a, graph):  # noqa: F811
    apollo = graph[("project", "Apollo")]
    out = admin.post(
        url("knowledge_relation_add", apollo.pk),
        {
            "type": "depends on",
            "direction": "out",
            "other_type": "technology",
            "other_name": "PostgreSQL",
            "create_missing": "on",
        },
    )
    assert out.status_code == 302
    depends = Relation.objects.for_tenant(tenant_a).get(relation_type="depends_on")
    assert (depends.source_id, depends.target.name, depends.origin) == (apollo.pk, "PostgreSQL", "dashboard")
    into = admin.post(
        url("knowledge_relation_add", apollo.pk),
        {
            "type": "funds",
            "direction": "in",
            "other_type": "organization",
            "other_name": "acme corp",
            "weight": "0.4",
        },
    )
    assert into.status_code == 302
    funds = Relation.objects.for_tenant(tenant_a).get(relation_type="funds")
    assert (funds.source.name, funds.target_id, funds.weight) == ("Acme Corp", apollo.pk, 0.4)
    before = tenant_state(tenant_a)
    missing = admin.post(
        url("knowledge_relation_add", apollo.pk),
        {"type": "uses", "direction": "out", "other_type": "technology", "other_name": "Redis"},
    )
    assert missing.status_code == 400
    assert "no technology &#x27;Redis&#x27;" in missing.content.decode()
    assert tenant_state(tenant_a) == before


def test_deleting_asks_for_confirmation_first(admin, tenant_a, graph):  # noqa: F811
    ada = graph[("person", "Ada Lovelace")]
    works = Relation.objects.for_tenant(tenant_a).get(relation_type="works_at")
    before = tenant_state(tenant_a)
    ask = body(admin.get(url("knowledge_relation_delete", works.pk)))
    assert "Delete the relation Ada Lovelace --works_at--&gt; Acme Corp?" in ask
    assert tenant_state(tenant_a) == before
    done = admin.post(url("knowledge_relation_delete", works.pk))
    assert done.status_code == 302
    assert done.url == url("knowledge_entity", ada.pk)
    assert not Relation.objects.for_tenant(tenant_a).filter(pk=works.pk).exists()

    assert "Its relations are deleted with it" in body(admin.get(url("knowledge_entity_delete", ada.pk)))
    gone = admin.post(url("knowledge_entity_delete", ada.pk))
    assert gone.url == url("knowledge")
    assert not Entity.objects.for_tenant(tenant_a).filter(pk=ada.pk).exists()
    assert not Relation.objects.for_tenant(tenant_a).exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="knowledge.entity_deleted").exists()


@pytest.mark.parametrize("who", ["viewer", "member"])
def test_readers_cannot_change_anything(request, who, tenant_a, graph):
    client = request.getfixturevalue(who)
    ada = graph[("person", "Ada Lovelace")]
    works = Relation.objects.for_tenant(tenant_a).get(relation_type="works_at")
    before = tenant_state(tenant_a)
    for target, data in (
        (url("knowledge_entity_create"), {"name": "X", "type": "person"}),
        (url("knowledge_entity_edit", ada.pk), {"name": "X", "type": "person"}),
        (
            url("knowledge_relation_add", ada.pk),
            {
                "type": "knows",
                "direction": "out",
                "other_type": "person",
                "other_name": "Y",
                "create_missing": "on",
            },
        ),
        (url("knowledge_entity_delete", ada.pk), {}),
        (url("knowledge_relation_delete", works.pk), {}),
    ):
        assert client.post(target, data).status_code == 403, target
    assert client.get(url("knowledge_entity_delete", ada.pk)).status_code == 403
    assert tenant_state(tenant_a) == before


def test_the_outsider_gets_404_with_nothing_changed(outsider, owner, tenant_a, graph):  # noqa: F811
    ada = graph[("person", "Ada Lovelace")]
    works = Relation.objects.for_tenant(tenant_a).get(relation_type="works_at")
    before = tenant_state(tenant_a)
    for target in (url("knowledge"), url("knowledge_entity", ada.pk), url("knowledge_entity_delete", ada.pk)):
        response = outsider.get(target)
        assert response.status_code == 404, target
        assert SECRET not in response.content.decode()
    for target, data in (
        (url("knowledge_entity_create"), {"name": "X", "type": "person"}),
        (url("knowledge_entity_edit", ada.pk), {"name": "X", "type": "person"}),
        (
            url("knowledge_relation_add", ada.pk),
            {"type": "knows", "direction": "out", "other_type": "person", "other_name": "Y"},
        ),
        (url("knowledge_entity_delete", ada.pk), {}),
        (url("knowledge_relation_delete", works.pk), {}),
    ):
        assert outsider.post(target, data).status_code == 404, target
    assert tenant_state(tenant_a) == before
    assert "Ada Lovelace" in body(owner.get(url("knowledge")))


def test_the_agents_page_links_to_each_agents_knowledge(viewer, agent):  # noqa: F811
    page = body(viewer.get(reverse("dashboard:agents")))
    assert f'href="{url("knowledge")}"' in page
