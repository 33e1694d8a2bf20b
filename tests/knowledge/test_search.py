"""Searching the knowledge graph: knowledge_graph_search called the way agent loops call it
(POST /api/v1/runtime/execute), and the same search as JSON (POST …/knowledge/search).

Exact names and aliases come first, then words of names, types and descriptions, then relation types,
then name prefixes; the call's user sees their graph and the shared one, never another user's or
another agent's."""

from __future__ import annotations

import pytest

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from tests.knowledge.support import EXECUTE, SEARCH, ref, relation, upsert

pytestmark = pytest.mark.django_db


def call(client, args, user_id="", agent="bot"):
    """knowledge_graph_search through the runtime, as an agent loop calls it."""
    body = {"agent": agent, "tool": "knowledge_graph_search", "args": args, "context": {"user_id": user_id}}
    response = client.post(EXECUTE, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def search(client, body, agent="bot"):
    """The same search as JSON."""
    response = client.post(f"/api/v1/agents/{agent}/knowledge/search", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def names(result):
    return [hit["name"] for hit in result["hits"]]


def matches(result):
    return [(hit["name"], hit["match"]) for hit in result["hits"]]


@pytest.fixture
def planets(tenant_a, agent, company):
    return upsert(
        tenant_a,
        agent,
        [
            {"type": "project", "name": "Mercury", "description": "The old billing system."},
            {"type": "organization", "name": "Mercury Labs"},
            {"type": "person", "name": "Freddie Mercury", "description": "Sings."},
            {"type": "project", "name": "Gemini", "description": "Runs on Postgres and mercury switches."},
        ],
    )


def test_an_exact_name_comes_before_partial_matches(viewer_a, member_a, planets):
    result = search(viewer_a, {"query": "Mercury"})
    assert matches(result)[0] == ("Mercury", "name")
    assert set(names(result)[1:]) == {"Mercury Labs", "Freddie Mercury", "Gemini"}
    assert {match for _, match in matches(result)[1:]} == {"text"}
    assert names(result)[-1] == "Gemini"  # a name outranks a description that mentions the word
    text = call(member_a, {"query": "Mercury"})["for_llm"]
    assert text.startswith('Knowledge graph search for "Mercury": 4 entities (of 9).\n\n1. Mercury [project]')
    assert "(match: exact name)" in text


def test_an_exact_alias_comes_before_words_of_descriptions(viewer_a, planets):
    assert matches(search(viewer_a, {"query": "postgres"})) == [("PostgreSQL", "alias"), ("Gemini", "text")]


def test_types_and_descriptions_are_searched(viewer_a, planets):
    assert set(names(search(viewer_a, {"query": "organization"}))) == {"Acme Corp", "Mercury Labs"}
    assert names(search(viewer_a, {"query": "billing engine"})) == ["Apollo"]
    assert names(search(viewer_a, {"query": '"billing system"'})) == ["Mercury"]


def test_relation_types_are_found(viewer_a, member_a, company):
    for query in ("depends_on", "depends on"):
        result = search(viewer_a, {"query": query})
        assert set(matches(result)) == {("Apollo", "relation"), ("PostgreSQL", "relation")}, query
    assert set(names(search(viewer_a, {"query": "works_at"}))) == {
        "Ada Lovelace",
        "Grace Hopper",
        "Acme Corp",
    }
    text = call(member_a, {"query": "depends on"})["for_llm"]
    assert "(match: relation type)" in text
    assert "Apollo --depends_on--> PostgreSQL [technology]" in text


def test_a_short_query_finds_names_by_prefix(viewer_a, planets):
    assert matches(search(viewer_a, {"query": "apo"})) == [("Apollo", "prefix")]
    person = search(viewer_a, {"query": "merc", "entity_type": "person"})
    assert matches(person) == [("Freddie Mercury", "prefix")]


def test_entity_type_and_limit_narrow_the_hits(viewer_a, planets):
    assert names(search(viewer_a, {"query": "mercury", "entity_type": "person"})) == ["Freddie Mercury"]
    assert names(search(viewer_a, {"query": "mercury", "entity_type": "Organization"})) == ["Mercury Labs"]
    every = names(search(viewer_a, {"query": "mercury"}))
    assert names(search(viewer_a, {"query": "mercury", "limit": 2})) == every[:2]


def test_each_hit_shows_its_relations_both_ways_and_depth_two_the_next_hop(viewer_a, member_a, company):
    result = call(member_a, {"query": "Apollo"})
    assert result["is_error"] is False
    text = result["for_llm"]
    assert text.startswith('Knowledge graph search for "Apollo": 1 entity (of 5).')
    assert "1. Apollo [project] (match: exact name)" in text
    assert "The new billing engine." in text
    assert "Apollo --depends_on--> PostgreSQL [technology]" in text
    assert "Ada Lovelace [person] --leads--> Apollo" in text
    assert "works_at" not in text  # two hops away
    hit = search(viewer_a, {"query": "Apollo"})["hits"][0]
    assert {(r["direction"], r["type"], r["entity"]["name"]) for r in hit["relations"]} == {
        ("out", "depends_on", "PostgreSQL"),
        ("in", "leads", "Ada Lovelace"),
    }

    deep = call(member_a, {"query": "Apollo", "depth": 2})["for_llm"]
    assert "       - Ada Lovelace --works_at--> Acme Corp [organization] (weight 0.9)" in deep
    hit = search(viewer_a, {"query": "Apollo", "depth": 2})["hits"][0]
    leads = next(r for r in hit["relations"] if r["type"] == "leads")
    assert [(r["type"], r["entity"]["name"]) for r in leads["relations"]] == [("works_at", "Acme Corp")]


def test_relations_per_entity_are_bounded(viewer_a, member_a, tenant_a, agent):
    people = [{"type": "person", "name": f"Person {i:02d}"} for i in range(25)]
    upsert(
        tenant_a,
        agent,
        [{"type": "organization", "name": "Hub"}, *people],
        [
            relation(ref("person", p["name"]), "works_at", ref("organization", "Hub"), weight=i / 100)
            for i, p in enumerate(people)
        ],
    )
    hit = search(viewer_a, {"query": "Hub"})["hits"][0]
    assert len(hit["relations"]) == 20
    assert hit["more_relations"] == 5
    assert hit["relations"][0]["entity"]["name"] == "Person 24"  # the strongest first
    assert "… and 5 more relations" in call(member_a, {"query": "Hub"})["for_llm"]


def test_a_call_sees_its_users_graph_and_the_shared_one_only(viewer_a, member_a, tenant_a, agent, company):
    upsert(
        tenant_a,
        agent,
        [{"type": "person", "name": "Alice's Dentist", "description": "Dr. Molar"}],
        user_id="alice",
    )
    upsert(
        tenant_a,
        agent,
        [{"type": "person", "name": "Dr. Molar"}],
        [relation(ref("person", "Dr. Molar"), "works_at", ref("organization", "Acme Corp"))],
        user_id="bob",
    )
    alice = call(member_a, {"query": "molar"}, user_id="alice")["for_llm"]
    assert "1. Alice's Dentist [person] (match: words, your own)" in alice
    assert "Dr. Molar [person]" not in alice
    bob = call(member_a, {"query": "molar"}, user_id="bob")["for_llm"]
    assert "1. Dr. Molar [person] (match: words, your own)" in bob
    assert "Dentist" not in bob
    assert "no matches among 5 entities" in call(member_a, {"query": "molar"})["for_llm"]
    # Bob's relation to the shared Acme is shown to Bob, not to Alice
    acme = call(member_a, {"query": "Acme Corp"}, user_id="alice")["for_llm"]
    assert "Dr. Molar" not in acme
    assert (
        "Dr. Molar [person] --works_at--> Acme Corp"
        in call(member_a, {"query": "Acme Corp"}, user_id="bob")["for_llm"]
    )
    as_alice = search(viewer_a, {"query": "molar", "user_id": "alice"})
    assert [(h["name"], h["user_id"]) for h in as_alice["hits"]] == [("Alice's Dentist", "alice")]


def test_another_agents_graph_is_invisible(member_a, tenant_a, planets):
    other = tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    assert call(member_a, {"query": "Mercury"}, agent="other")["for_llm"] == (
        "The knowledge graph of other has no entities you can see: nothing has been recorded yet, so there "
        "is nothing to search."
    )
    upsert(tenant_a, other, [{"type": "project", "name": "Zeus"}])
    assert "no matches" in call(member_a, {"query": "Zeus"})["for_llm"]
    assert "1. Zeus [project]" in call(member_a, {"query": "Zeus"}, agent="other")["for_llm"]
    assert "Mercury" not in call(member_a, {"query": "Mercury"}, agent="other")["for_llm"].split(":", 1)[1]


def test_an_empty_graph_and_no_match_say_so(member_a, viewer_a, agent, company):
    nothing = call(member_a, {"query": "quantum chromodynamics"})
    assert nothing["is_error"] is False
    assert nothing["for_llm"].startswith(
        'Knowledge graph search for "quantum chromodynamics": no matches among 5 entities.'
    )
    assert search(viewer_a, {"query": "quantum chromodynamics"})["hits"] == []
    empty = call(member_a, {"query": "Ada", "entity_type": "planet"})
    assert empty["for_llm"].startswith(
        "The knowledge graph of bot has no entities of type planet you can see"
    )


def test_invalid_arguments_are_error_results(member_a, agent):
    assert call(member_a, {"query": "   "})["for_llm"].startswith("knowledge_graph_search: query is required")
    assert call(member_a, {"query": "a", "entity_type": "no way!"})["is_error"] is True
    assert call(member_a, {"query": "a", "limit": 51})["is_error"] is True
    assert call(member_a, {"query": "a", "depth": 3})["is_error"] is True
    assert call(member_a, {"query": "x" * 501})["for_llm"] == (
        "knowledge_graph_search: query is longer than 500 characters; shorten it."
    )


def test_the_tool_is_listed_and_available(member_a, agent):
    body = member_a.get("/api/v1/agents/bot/tools").json()
    spec = next(t for t in body["tools"] if t["function"]["name"] == "knowledge_graph_search")
    assert set(spec["function"]["parameters"]["properties"]) == {"query", "entity_type", "limit", "depth"}


def test_the_search_api_answers_the_same_hits_as_json(
    viewer_a, tenant_a, agent, company, django_assert_max_num_queries
):
    upsert(tenant_a, agent, [{"type": "person", "name": "Ada Twin"}], user_id="alice")
    with django_assert_max_num_queries(12):
        body = viewer_a.post(SEARCH, {"query": "ada", "depth": 2}, format="json").json()
    assert body["entities_in_scope"] == 5
    assert [(h["name"], h["match"]) for h in body["hits"]] == [("Ada Lovelace", "alias")]
    hit = body["hits"][0]
    assert hit["aliases"] == ["Ada"]
    assert {r["type"] for r in hit["relations"]} == {"works_at", "leads"}
    as_alice = viewer_a.post(SEARCH, {"query": "ada", "user_id": "alice"}, format="json").json()
    assert [h["name"] for h in as_alice["hits"]] == ["Ada Lovelace", "Ada Twin"]
    assert as_alice["hits"][1]["user_id"] == "alice"


def test_a_long_answer_is_cut_with_a_note(member_a, tenant_a, agent):
    people = [{"type": "person", "name": f"Person {i:02d} " + "x" * 180} for i in range(20)]
    orgs = [{"type": "organization", "name": f"Org {i}"} for i in range(10)]
    upsert(
        tenant_a,
        agent,
        [*orgs, *people],
        [
            relation(ref("person", p["name"]), "works_at", ref("organization", o["name"]))
            for p in people
            for o in orgs
        ],
    )
    text = call(member_a, {"query": "org", "depth": 2, "limit": 10})["for_llm"]
    assert "1. Org " in text
    assert len(text) <= 40_500
    assert "more entities left out to keep this answer short" in text


def test_the_strap_agent_tool_reaches_the_search(member_a, company):
    body = {
        "agent": "bot",
        "tool": "agent",
        "args": {"resource": "knowledge", "action": "search", "query": "Apollo", "depth": 2},
        "style": "strap",
    }
    response = member_a.post(EXECUTE, body, format="json")
    assert response.status_code == 200, response.content
    text = response.json()["for_llm"]
    assert "1. Apollo [project] (match: exact name)" in text
    assert "Ada Lovelace --works_at--> Acme Corp" in text


@pytest.mark.parametrize("query", ["&&& ||", "!", '"', "-", "a:*", "'); drop table x; --", "%_%"])
def test_punctuation_and_operators_are_plain_words(viewer_a, member_a, company, query):
    assert search(viewer_a, {"query": query})["hits"] == []
    assert "no matches among 5 entities" in call(member_a, {"query": query})["for_llm"]
