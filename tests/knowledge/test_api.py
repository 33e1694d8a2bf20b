"""The knowledge API: /api/v1/agents/<key>/knowledge/{entities,relations}/, …/upsert and …/search.

Upserts merge into the entity of the same type and name; bulk payloads are bounded and written whole or
not at all, with errors naming the item; every write is audited and published on ``knowledge``."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.knowledge import services
from apps.knowledge.models import Entity, Relation
from apps.knowledge.validation import parse_entity
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.knowledge.support import ENTITIES, RELATIONS, SEARCH, UPSERT, ref, relation, upsert

pytestmark = pytest.mark.django_db

SECRET = "the vault opens with 4711"


def entities(tenant, **filters):
    return Entity.objects.for_tenant(tenant).filter(**filters)


def relations(tenant, **filters):
    return Relation.objects.for_tenant(tenant).filter(**filters)


def verbs(tenant):
    rows = AuditEvent.objects.for_tenant(tenant).filter(verb__startswith="knowledge.").order_by("created_at")
    return [row.verb for row in rows]


# --- upsert and merge --------------------------------------------------------------------------------


def test_posting_an_entity_creates_it_then_merges_into_it(
    admin_a, agent, tenant_a, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        created = admin_a.post(
            ENTITIES,
            {
                "type": "Organization",
                "name": "  Acme   Corp ",
                "description": "Makes anvils.",
                "properties": {"founded": 1949, "city": "Springfield"},
                "aliases": ["ACME", "acme"],
            },
            format="json",
        )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["type"], body["name"], body["user_id"], body["source"]) == (
        "organization",
        "Acme Corp",
        "",
        "api",
    )
    assert body["aliases"] == ["ACME"]  # "acme" is the same alias
    assert (body["outgoing"], body["incoming"]) == ([], [])

    with django_capture_on_commit_callbacks(execute=True):
        merged = admin_a.post(
            ENTITIES,
            {
                "type": "organization",
                "name": "acme corp",
                "properties": {"city": None, "employees": 12},
                "aliases": ["Acme Inc.", "Acme corp"],
            },
            format="json",
        )
    assert merged.status_code == 200, merged.content
    again = merged.json()
    assert again["id"] == body["id"]
    assert again["name"] == "Acme Corp"
    assert again["description"] == "Makes anvils."  # not given: kept
    assert again["properties"] == {"founded": 1949, "employees": 12}  # merged, null removes
    assert again["aliases"] == ["ACME", "Acme Inc."]  # added; its own name is no alias

    replaced = admin_a.post(
        ENTITIES, {"type": "organization", "name": "Acme Corp", "description": "Sells anvils."}, format="json"
    )
    assert replaced.json()["description"] == "Sells anvils."
    assert entities(tenant_a).count() == 1
    assert verbs(tenant_a) == [
        "knowledge.entity_created",
        "knowledge.entity_updated",
        "knowledge.entity_updated",
    ]
    assert [e["type"] for e in published()] == [
        "knowledge.entity_created",
        "knowledge.entity_updated",
        "knowledge.entity_updated",
    ]
    assert published()[0]["data"] == {
        "id": body["id"],
        "agent": "bot",
        "user_id": "",
        "type": "organization",
        "name": "Acme Corp",
    }


def test_the_same_name_of_another_type_or_user_is_another_entity(admin_a, agent, tenant_a):
    admin_a.post(ENTITIES, {"type": "project", "name": "Mercury"}, format="json")
    planet = admin_a.post(ENTITIES, {"type": "planet", "name": "Mercury"}, format="json")
    own = admin_a.post(ENTITIES, {"type": "project", "name": "Mercury", "user_id": "alice"}, format="json")
    assert (planet.status_code, own.status_code) == (201, 201)
    assert own.json()["user_id"] == "alice"
    assert entities(tenant_a, name="Mercury").count() == 3


def test_a_relation_is_upserted_by_the_names_of_its_ends(admin_a, company, tenant_a):
    body = relation(ref("person", "grace hopper"), "Works at", ref("organization", "ACME CORP"), weight=0.5)
    updated = admin_a.post(RELATIONS, {**body, "properties": {"since": 1950}}, format="json")
    assert updated.status_code == 200, updated.content  # Grace already works at Acme
    row = updated.json()
    assert (row["type"], row["source"]["name"], row["target"]["name"]) == (
        "works_at",
        "Grace Hopper",
        "Acme Corp",
    )
    assert (row["weight"], row["properties"]) == (0.5, {"since": 1950})

    created = admin_a.post(
        RELATIONS, relation(ref("person", "Grace Hopper"), "advises", ref("project", "Apollo")), format="json"
    )
    assert created.status_code == 201
    assert relations(tenant_a, relation_type="advises").count() == 1
    kept = admin_a.post(RELATIONS, {**body, "properties": {"role": "cto"}}, format="json").json()
    assert (kept["weight"], kept["properties"]) == (0.5, {"since": 1950, "role": "cto"})
    assert relations(tenant_a, relation_type="works_at").count() == 2


def test_a_relation_to_an_unknown_entity_is_refused_unless_it_asks_to_create_it(admin_a, company, tenant_a):
    before = tenant_state(tenant_a)
    body = relation(ref("person", "Ada Lovelace"), "knows", ref("person", "Charles Babbage"))
    refused = error(admin_a.post(RELATIONS, body, format="json"), 400, "invalid")
    assert refused["message"].startswith("relation.target: no person 'Charles Babbage' in the shared graph")
    assert list(refused["details"]) == ["relation.target"]
    assert tenant_state(tenant_a) == before

    created = admin_a.post(RELATIONS, {**body, "create_missing": True}, format="json")
    assert created.status_code == 201, created.content
    assert entities(tenant_a, entity_type="person", name="Charles Babbage").exists()
    assert verbs(tenant_a)[-2:] == ["knowledge.entity_created", "knowledge.relation_created"]


def test_a_users_relation_may_reach_the_shared_graph_but_not_another_user(admin_a, company, tenant_a):
    admin_a.post(ENTITIES, {"type": "person", "name": "Alice", "user_id": "alice"}, format="json")
    admin_a.post(ENTITIES, {"type": "person", "name": "Bob", "user_id": "bob"}, format="json")
    mine = admin_a.post(
        RELATIONS,
        {
            **relation(ref("person", "Alice"), "works_at", ref("organization", "Acme Corp")),
            "user_id": "alice",
        },
        format="json",
    )
    assert mine.status_code == 201, mine.content
    assert mine.json()["user_id"] == "alice"
    unseen = admin_a.post(
        RELATIONS,
        {**relation(ref("person", "Alice"), "knows", ref("person", "Bob")), "user_id": "alice"},
        format="json",
    )
    assert "no person 'Bob'" in error(unseen, 400, "invalid")["message"]
    from_shared = admin_a.post(
        RELATIONS, relation(ref("person", "Alice"), "knows", ref("person", "Ada Lovelace")), format="json"
    )
    assert "no person 'Alice' in the shared graph" in error(from_shared, 400, "invalid")["message"]


# --- bulk ----------------------------------------------------------------------------------------------


def test_bulk_upsert_writes_entities_and_relations_that_name_them(
    admin_a, company, tenant_a, published, django_capture_on_commit_callbacks
):
    payload = {
        "entities": [
            {"type": "person", "name": "Linus", "description": "Kernel."},
            {"type": "project", "name": "apollo", "properties": {"stage": "beta"}},
        ],
        "relations": [
            relation(ref("person", "Linus"), "contributes_to", ref("project", "Apollo")),
            relation(ref("project", "Apollo"), "depends_on", ref("technology", "Postgres")),
        ],
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_a.post(UPSERT, payload, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert {
        k: body[k] for k in ("entities_created", "entities_updated", "relations_created", "relations_updated")
    } == {
        "entities_created": 1,
        "entities_updated": 1,
        "relations_created": 1,
        "relations_updated": 1,
    }
    assert [(e["name"], e["created"]) for e in body["entities"]] == [("Linus", True), ("Apollo", False)]
    assert entities(tenant_a, name="Apollo").get().properties == {"stage": "beta"}
    event = (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="knowledge.graph_upserted").latest("created_at")
    )
    assert (event.data["entities_created"], event.data["relations_updated"]) == (1, 1)
    assert [e["type"] for e in published()] == ["knowledge.graph_upserted"]


def test_bulk_upsert_is_all_or_nothing_and_names_the_bad_item(admin_a, company, tenant_a):
    before = tenant_state(tenant_a)
    payload = {
        "entities": [{"type": "person", "name": "Linus"}],
        "relations": [
            relation(ref("person", "Linus"), "knows", ref("person", "Ada")),
            relation(ref("person", "Linus"), "knows", ref("person", "Nobody")),
        ],
    }
    refused = error(admin_a.post(UPSERT, payload, format="json"), 400, "invalid")
    assert refused["message"].startswith("relations[1].target: no person 'Nobody'")
    assert list(refused["details"]) == ["relations[1].target"]
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        (
            {"entities": [{"type": "person", "name": "a"}, {"type": "person", "name": "x" * 201}]},
            "entities[1].name",
            "at most 200",
        ),
        ({"entities": [{"type": "person", "name": "Stra\u00dfe" * 33}]}, "entities[0].name", "at most 200"),
        ({"entities": [{"type": "person", "name": "  "}]}, "entities[0].name", "a name is required"),
        ({"entities": [{"type": "9 lives", "name": "Cat"}]}, "entities[0].type", "is not a type"),
        (
            {"entities": [{"type": "person", "name": "Cat", "colour": "red"}]},
            "entities[0].colour",
            "unknown field",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "description": "d" * 4001}]},
            "entities[0].description",
            "at most 4000",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "properties": {f"k{i}": i for i in range(51)}}]},
            "entities[0].properties",
            "at most 50 keys",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "properties": {"blob": "x" * 17000}}]},
            "entities[0].properties",
            "at most 16384 bytes",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "properties": ["not", "an", "object"]}]},
            "entities[0].properties",
            "JSON object",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "aliases": [f"a{i}" for i in range(21)]}]},
            "entities[0].aliases",
            "at most 20",
        ),
        (
            {"entities": [{"type": "person", "name": "C", "aliases": ["ok", 7]}]},
            "entities[0].aliases[1]",
            "a name is required",
        ),
        (
            {
                "relations": [
                    relation(
                        ref("person", "Ada Lovelace"), "knows", ref("person", "Grace Hopper"), weight=1.5
                    )
                ]
            },
            "relations[0].weight",
            "from 0 to 1",
        ),
        (
            {
                "relations": [
                    relation(
                        ref("person", "Ada Lovelace"), "knows", ref("person", "Grace Hopper"), weight=True
                    )
                ]
            },
            "relations[0].weight",
            "from 0 to 1",
        ),
        (
            {"relations": [relation(ref("person", "Ada Lovelace"), "", ref("person", "Grace Hopper"))]},
            "relations[0].type",
            "a type is required",
        ),
        (
            {"relations": [{"source": "Ada", "type": "knows", "target": ref("person", "Grace Hopper")}]},
            "relations[0].source",
            "JSON object",
        ),
        (
            {"relations": [relation(ref("person", "Ada Lovelace"), "knows", {"name": "Grace Hopper"})]},
            "relations[0].target.type",
            "a type is required",
        ),
        ({"entities": {"type": "person"}}, "entities", "must be a list"),
        (
            {"entities": [{"type": "person", "name": f"p{i}"} for i in range(501)]},
            "entities",
            "at most 500 per call",
        ),
        (
            {"relations": [relation(ref("person", "a"), "knows", ref("person", "b"))] * 1001},
            "relations",
            "at most 1000 per call",
        ),
        ({}, "entities", "give entities, relations or both"),
        ({"entities": [], "graph": 1}, "graph", "unknown field"),
        ({"user_id": "u" * 256, "entities": [{"type": "person", "name": "a"}]}, "user_id", "at most 255"),
    ],
)
def test_bulk_validation_names_the_field_and_item(admin_a, company, tenant_a, payload, field, says):
    before = tenant_state(tenant_a)
    refused = error(admin_a.post(UPSERT, payload, format="json"), 400, "invalid")
    assert list(refused["details"]) == [field], refused
    assert says in refused["details"][field][0]
    assert refused["message"].startswith(f"{field}: ")
    assert tenant_state(tenant_a) == before


def test_merged_properties_and_aliases_stay_bounded(admin_a, agent, tenant_a):
    admin_a.post(
        ENTITIES, {"type": "person", "name": "Ann", "aliases": [f"a{i}" for i in range(15)]}, format="json"
    )
    too_many = error(
        admin_a.post(
            ENTITIES, {"type": "person", "name": "Ann", "aliases": [f"b{i}" for i in range(6)]}, format="json"
        ),
        400,
        "invalid",
    )
    assert "would have 21 aliases" in too_many["message"]
    admin_a.post(
        ENTITIES,
        {"type": "person", "name": "Ann", "properties": {f"k{i}": i for i in range(30)}},
        format="json",
    )
    over = admin_a.post(
        ENTITIES,
        {"type": "person", "name": "Ann", "properties": {f"m{i}": i for i in range(21)}},
        format="json",
    )
    assert "at most 50 keys" in error(over, 400, "invalid")["details"]["entity.properties"][0]
    assert len(entities(tenant_a).get().aliases) == 15


# --- reading, changing, deleting -----------------------------------------------------------------------


def test_the_list_filters_pages_and_is_bounded_in_queries(
    viewer_a, company, tenant_a, agent, django_assert_max_num_queries
):
    upsert(tenant_a, agent, [{"type": "person", "name": "Alice"}], user_id="alice")
    with django_assert_max_num_queries(6):
        body = viewer_a.get(ENTITIES).json()
    assert body["count"] == 6
    assert [row["name"] for row in body["results"]] == [
        "Acme Corp",
        "Ada Lovelace",
        "Alice",
        "Apollo",
        "Grace Hopper",
        "PostgreSQL",
    ]
    assert [r["name"] for r in viewer_a.get(ENTITIES, {"type": "person"}).json()["results"]] == [
        "Ada Lovelace",
        "Alice",
        "Grace Hopper",
    ]
    assert [r["name"] for r in viewer_a.get(ENTITIES, {"q": "postgres"}).json()["results"]] == ["PostgreSQL"]
    assert [r["name"] for r in viewer_a.get(ENTITIES, {"q": "billing"}).json()["results"]] == ["Apollo"]
    assert [r["name"] for r in viewer_a.get(ENTITIES, {"user_id": "alice"}).json()["results"]] == ["Alice"]
    assert viewer_a.get(ENTITIES, {"user_id": ""}).json()["count"] == 5
    assert [r["name"] for r in viewer_a.get(ENTITIES, {"page_size": 2, "page": 3}).json()["results"]] == [
        "Grace Hopper",
        "PostgreSQL",
    ]
    error(viewer_a.get(ENTITIES, {"page_size": 500}), 400, "invalid")
    error(viewer_a.get(ENTITIES, {"colour": "red"}), 400, "invalid")
    error(viewer_a.get(ENTITIES, {"type": "no way!"}), 400, "invalid")


def test_an_entity_shows_its_relations_both_ways(viewer_a, company):
    acme = company[("organization", "Acme Corp")]
    body = viewer_a.get(f"{ENTITIES}{acme.pk}/").json()
    assert body["properties"] == {"founded": 1949}
    assert body["outgoing"] == []
    assert [(r["source"]["name"], r["type"], r["weight"]) for r in body["incoming"]] == [
        ("Ada Lovelace", "works_at", 0.9),
        ("Grace Hopper", "works_at", None),
    ]
    assert body["incoming_total"] == 2
    ada = viewer_a.get(f"{ENTITIES}{company[('person', 'Ada Lovelace')].pk}/").json()
    assert [(r["type"], r["target"]["name"]) for r in ada["outgoing"]] == [
        ("works_at", "Acme Corp"),
        ("leads", "Apollo"),
    ]
    error(viewer_a.get(f"{ENTITIES}not-a-uuid/"), 404, "not_found")
    error(viewer_a.get(f"{ENTITIES}00000000-0000-0000-0000-000000000000/"), 404, "not_found")
    error(viewer_a.get("/api/v1/agents/nobody/knowledge/entities/"), 404, "not_found")


def test_patch_sets_fields_and_refuses_a_name_in_use(admin_a, company, tenant_a):
    ada = company[("person", "Ada Lovelace")]
    url = f"{ENTITIES}{ada.pk}/"
    changed = admin_a.patch(
        url,
        {"name": "Augusta Ada King", "aliases": ["Ada Lovelace"], "properties": {"born": 1815}},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert (body["name"], body["aliases"], body["properties"]) == (
        "Augusta Ada King",
        ["Ada Lovelace"],
        {"born": 1815},
    )
    assert len(body["outgoing"]) == 2  # relations follow the entity
    before = tenant_state(tenant_a)
    clash = error(admin_a.patch(url, {"name": "grace  hopper"}, format="json"), 409, "conflict")
    assert "already has person 'Grace Hopper'" in clash["message"]
    assert "name" in error(admin_a.patch(url, {"name": None}, format="json"), 400, "invalid")["details"]
    assert "user_id" in error(admin_a.patch(url, {"user_id": "x"}, format="json"), 400, "invalid")["details"]
    assert "body" in error(admin_a.patch(url, {}, format="json"), 400, "invalid")["details"]
    assert "type" in error(admin_a.patch(url, {"type": "!"}, format="json"), 400, "invalid")["details"]
    assert tenant_state(tenant_a) == before


def test_deleting_an_entity_deletes_its_relations(
    admin_a, company, tenant_a, published, django_capture_on_commit_callbacks
):
    acme = company[("organization", "Acme Corp")]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_a.delete(f"{ENTITIES}{acme.pk}/")
    assert response.status_code == 204
    assert not entities(tenant_a, pk=acme.pk).exists()
    assert not relations(tenant_a, relation_type="works_at").exists()
    assert relations(tenant_a).count() == 2
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="knowledge.entity_deleted")
    assert (event.data["name"], event.data["relations_deleted"]) == ("Acme Corp", 2)
    assert published()[-1]["type"] == "knowledge.entity_deleted"
    error(admin_a.delete(f"{ENTITIES}{acme.pk}/"), 404, "not_found")


def test_relations_are_listed_filtered_and_deleted(admin_a, company, tenant_a):
    body = admin_a.get(RELATIONS).json()
    assert [(r["source"]["name"], r["type"], r["target"]["name"]) for r in body["results"]] == [
        ("Ada Lovelace", "leads", "Apollo"),
        ("Ada Lovelace", "works_at", "Acme Corp"),
        ("Apollo", "depends_on", "PostgreSQL"),
        ("Grace Hopper", "works_at", "Acme Corp"),
    ]
    apollo = company[("project", "Apollo")]
    around = admin_a.get(RELATIONS, {"entity": str(apollo.pk)}).json()
    assert {r["type"] for r in around["results"]} == {"leads", "depends_on"}
    assert admin_a.get(RELATIONS, {"type": "works_at"}).json()["count"] == 2
    error(admin_a.get(RELATIONS, {"entity": "00000000-0000-0000-0000-000000000000"}), 404, "not_found")
    one = around["results"][0]
    assert admin_a.get(f"{RELATIONS}{one['id']}/").json()["id"] == one["id"]
    assert admin_a.delete(f"{RELATIONS}{one['id']}/").status_code == 204
    assert not relations(tenant_a, pk=one["id"]).exists()
    assert entities(tenant_a).count() == 5
    assert verbs(tenant_a)[-1] == "knowledge.relation_deleted"


# --- personas ------------------------------------------------------------------------------------------


@pytest.fixture
def secret_graph(tenant_a, agent):
    return upsert(
        tenant_a,
        agent,
        [{"type": "person", "name": "Ada", "description": SECRET}, {"type": "organization", "name": "Acme"}],
        [relation(ref("person", "Ada"), "works_at", ref("organization", "Acme"))],
    )


@pytest.mark.parametrize(
    ("method", "path", "body", "least", "success"),
    [
        ("get", "entities/", None, "viewer", 200),
        ("post", "entities/", {"type": "person", "name": "Ada", "description": "new"}, "admin", 200),
        ("get", "entities/{ada}/", None, "viewer", 200),
        ("patch", "entities/{ada}/", {"description": "changed"}, "admin", 200),
        ("delete", "entities/{ada}/", None, "admin", 204),
        ("get", "relations/", None, "viewer", 200),
        (
            "post",
            "relations/",
            relation(ref("person", "Ada"), "founded", ref("organization", "Acme")),
            "admin",
            201,
        ),
        ("get", "relations/{works}/", None, "viewer", 200),
        ("delete", "relations/{works}/", None, "admin", 204),
        ("post", "upsert", {"entities": [{"type": "person", "name": "Bea"}]}, "admin", 200),
        ("post", "search", {"query": "Ada"}, "viewer", 200),
    ],
)
def test_personas(request, tenant_a, secret_graph, method, path, body, least, success):
    ada = secret_graph[("person", "Ada")]
    works = Relation.objects.for_tenant(tenant_a).get()
    url = "/api/v1/agents/bot/knowledge/" + path.format(ada=ada.pk, works=works.pk)
    check_personas(
        request,
        tenant_a,
        method=method,
        url=url,
        body=body,
        least=least,
        success=success,
        outsider_status=404,
        never_shown_to_outsider=(SECRET, "Ada"),
    )


def test_the_services_refuse_another_tenants_agent_and_rows(tenant_a, tenant_b, company, agent):
    b = Actor.system(tenant_b)
    before = tenant_state(tenant_a)
    acme = company[("organization", "Acme Corp")]
    with pytest.raises(ServiceError, match="an agent of this tenant only"):
        services.entity_upsert(
            actor=b, agent=agent, user_id="", item=parse_entity({"type": "x", "name": "y"})
        )
    with pytest.raises(ServiceError, match="an agent of this tenant only"):
        services.graph_upsert(actor=b, agent=agent, user_id="", entities=[], relations=[])
    with pytest.raises(ServiceError, match="an entity of this agent only"):
        services.entity_delete(actor=b, agent=agent, entity=acme)
    with pytest.raises(ServiceError, match="a relation of this agent only"):
        services.relation_delete(
            actor=b,
            agent=agent,
            relation=Relation.objects.for_tenant(tenant_a).filter(relation_type="leads").get(),
        )
    assert tenant_state(tenant_a) == before


def test_search_validates_its_input(viewer_a, company):
    assert "query" in error(viewer_a.post(SEARCH, {}, format="json"), 400, "invalid")["details"]
    assert (
        "limit"
        in error(viewer_a.post(SEARCH, {"query": "a", "limit": 51}, format="json"), 400, "invalid")["details"]
    )
    assert (
        "depth"
        in error(viewer_a.post(SEARCH, {"query": "a", "depth": 3}, format="json"), 400, "invalid")["details"]
    )
    assert (
        "colour"
        in error(viewer_a.post(SEARCH, {"query": "a", "colour": 1}, format="json"), 400, "invalid")["details"]
    )
    bad_type = error(
        viewer_a.post(SEARCH, {"query": "a", "entity_type": "no way!"}, format="json"), 400, "invalid"
    )
    assert "is not a type" in bad_type["message"]


def test_a_full_bulk_payload_is_written_in_a_bounded_number_of_queries(
    admin_a, agent, tenant_a, django_assert_max_num_queries
):
    people = [{"type": "person", "name": f"Person {i}", "properties": {"n": i}} for i in range(500)]
    links = [
        relation(ref("person", f"Person {i}"), kind, ref("person", f"Person {(i + step) % 500}"))
        for i in range(500)
        for kind, step in (("knows", 1), ("mentors", 7))
    ]
    with django_assert_max_num_queries(30):
        response = admin_a.post(UPSERT, {"entities": people, "relations": links}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["entities_created"], response.json()["relations_created"]) == (500, 1000)
    with django_assert_max_num_queries(30):
        again = admin_a.post(UPSERT, {"entities": people, "relations": links}, format="json")
    assert (again.json()["entities_updated"], again.json()["relations_updated"]) == (500, 1000)
    assert relations(tenant_a).count() == 1000
