"""Memory search (apps.memory.search) and the memory_search tool: modes, scoping by tenant, agent and
user, embedder separation, validation, fallback when the embedder fails, and the tool through the
pipeline and POST /api/v1/runtime/execute."""

from __future__ import annotations

import pytest

from apps.accounts import services
from apps.memory.embeddings import LOCAL_MODEL, LocalEmbedder
from apps.memory.models import EmbeddingSettings, MemoryChunk, MemoryDocument
from apps.memory.search import MAX_LIMIT, MAX_QUERY_CHARS, SearchError, hybrid_search
from apps.runtime import pipeline
from apps.tenants.actors import Actor
from apps.toolkit import gateway

pytestmark = pytest.mark.django_db

DEPLOY = (
    "Deployments",
    "Releases reach production through the pipeline in GitHub Actions; a merge to main rolls the "
    "container image out to the web hosts one at a time.",
)
COFFEE = ("Coffee machine", "The espresso machine in the kitchen needs descaling every Friday.")
PARKING = ("Car parking", "The garage has 40 spaces; bicycles go in the locked room by the back entrance.")


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def local(tenant) -> None:
    EmbeddingSettings.objects.create(tenant=tenant, kind=EmbeddingSettings.Kind.LOCAL)


def remember(tenant, agent, path, section, *, user_id="", embedder=LOCAL_MODEL, vector=None):
    heading, text = section
    document = MemoryDocument.objects.create(
        tenant=tenant, agent=agent, user_id=user_id, path=path, content=f"# {heading}\n\n{text}\n"
    )
    if embedder and vector is None:
        vector = LocalEmbedder().embed([f"{heading}\n\n{text}"])[0]
    return MemoryChunk.objects.create(
        tenant=tenant,
        agent=agent,
        document=document,
        user_id=user_id,
        ordinal=0,
        heading=heading,
        text=text,
        embedding=vector if embedder else None,
        embedder=embedder,
    )


def paths(result) -> list[str]:
    return [hit.path for hit in result.hits]


def test_without_an_embedder_search_is_full_text_and_says_so(tenant_a, agent):
    remember(tenant_a, agent, "memory/deploy.md", DEPLOY, embedder="")
    remember(tenant_a, agent, "memory/coffee.md", COFFEE, embedder="")
    result = hybrid_search(tenant_a, agent, "deploying container images")
    assert result.mode == "fts"
    assert paths(result) == ["memory/deploy.md"]  # English stemming: deploying finds Deployments
    hit = result.hits[0]
    assert (hit.heading, hit.scope, hit.score, hit.vector_score) == ("Deployments", "global", 1.0, 0.0)
    assert "container image" in hit.snippet
    assert hybrid_search(tenant_a, agent, "how do we ship code to servers").hits == []


def test_with_the_local_model_a_paraphrase_is_found_by_meaning(tenant_a, agent):
    local(tenant_a)
    remember(tenant_a, agent, "memory/deploy.md", DEPLOY)
    remember(tenant_a, agent, "memory/coffee.md", COFFEE)
    remember(tenant_a, agent, "memory/parking.md", PARKING)
    result = hybrid_search(tenant_a, agent, "how does new code get shipped to the live servers")
    assert result.mode == "hybrid"
    assert result.embedder == LOCAL_MODEL
    assert result.hits[0].path == "memory/deploy.md"
    assert result.hits[0].text_score == 0.0
    assert result.hits[0].vector_score > 0.3
    assert result.hits[0].score == pytest.approx(0.7 * result.hits[0].vector_score)
    # One hit per chunk, best first, all of them scored.
    assert len(set(paths(result))) == len(result.hits) == 3
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_a_chunk_found_both_ways_adds_both_parts(tenant_a, agent):
    local(tenant_a)
    remember(tenant_a, agent, "memory/coffee.md", COFFEE)
    remember(tenant_a, agent, "memory/deploy.md", DEPLOY)
    hit = hybrid_search(tenant_a, agent, "espresso descaling").hits[0]
    assert hit.path == "memory/coffee.md"
    assert hit.text_score == 1.0
    assert hit.score == pytest.approx(0.3 + 0.7 * hit.vector_score)


def test_search_sees_only_the_agent_s_memory_in_the_caller_s_scope(tenant_a, tenant_b, agent):
    local(tenant_a)
    local(tenant_b)
    other_agent = services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    stranger = services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    remember(tenant_a, agent, "memory/global.md", COFFEE)
    remember(tenant_a, agent, "MEMORY.md", COFFEE, user_id="alice")
    remember(tenant_a, agent, "memory/bob.md", COFFEE, user_id="bob")
    remember(tenant_a, other_agent, "memory/other-agent.md", COFFEE)
    remember(tenant_b, stranger, "memory/other-tenant.md", COFFEE)
    query = "espresso machine"

    def found(scope, user_id="alice"):
        return sorted(paths(hybrid_search(tenant_a, agent, query, user_id=user_id, scope=scope)))

    assert found("all") == ["MEMORY.md", "memory/global.md"]
    assert found("user") == ["MEMORY.md"]
    assert found("global") == ["memory/global.md"]
    assert found("all", user_id="") == ["memory/global.md"]
    scopes = {h.path: h.scope for h in hybrid_search(tenant_a, agent, query, user_id="alice").hits}
    assert scopes == {"MEMORY.md": "user", "memory/global.md": "global"}
    assert paths(hybrid_search(tenant_b, stranger, query)) == ["memory/other-tenant.md"]


def test_vectors_of_another_model_are_never_compared(tenant_a, agent):
    local(tenant_a)
    query = "how does new code get shipped to the live servers"
    same_vector = LocalEmbedder().embed([query])[0]
    remember(
        tenant_a,
        agent,
        "memory/other-model.md",
        DEPLOY,
        embedder="openai:text-embedding-3-small@384",
        vector=same_vector,
    )
    remember(tenant_a, agent, "memory/coffee.md", COFFEE)
    result = hybrid_search(tenant_a, agent, query)
    assert result.mode == "hybrid"
    assert "memory/other-model.md" not in paths(result)
    assert paths(result) == ["memory/coffee.md"]


def test_a_failing_embedder_falls_back_to_full_text_and_says_why(tenant_a, agent):
    EmbeddingSettings.objects.create(
        tenant=tenant_a, kind=EmbeddingSettings.Kind.OPENAI, base_url="http://127.0.0.1:9/v1", model="m"
    )
    remember(tenant_a, agent, "memory/coffee.md", COFFEE, embedder="")
    result = hybrid_search(tenant_a, agent, "espresso")
    assert result.mode == "fts"
    assert paths(result) == ["memory/coffee.md"]
    assert "vector search is unavailable" in result.warning
    assert "must be a public http(s) address" in result.warning


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        ("", {}, "query is required"),
        ("   ", {}, "query is required"),
        (None, {}, "query is required"),
        ("x" * (MAX_QUERY_CHARS + 1), {}, f"longer than {MAX_QUERY_CHARS} characters"),
        ("coffee", {"limit": 0}, f"from 1 to {MAX_LIMIT}"),
        ("coffee", {"limit": MAX_LIMIT + 1}, f"from 1 to {MAX_LIMIT}"),
        ("coffee", {"limit": True}, f"from 1 to {MAX_LIMIT}"),
        ("coffee", {"limit": "5"}, f"from 1 to {MAX_LIMIT}"),
        ("coffee", {"scope": "everyone"}, "scope must be one of user, global, all"),
        ("coffee", {"scope": "user"}, "scope user needs a user"),
    ],
)
def test_invalid_searches_are_refused_with_a_reason(tenant_a, agent, query, options, message):
    with pytest.raises(SearchError, match=message):
        hybrid_search(tenant_a, agent, query, **options)


def test_hostile_full_text_syntax_is_just_words(tenant_a, agent):
    remember(tenant_a, agent, "memory/coffee.md", COFFEE, embedder="")
    for query in ("espresso & | ! :* (", "'); DROP TABLE memory_memorychunk; --", '"espresso', "-", "or or"):
        hybrid_search(tenant_a, agent, query)
    assert paths(hybrid_search(tenant_a, agent, '"espresso machine" -parking')) == ["memory/coffee.md"]


def call(agent, args, **context):
    return pipeline.execute(
        actor=Actor.system(agent.tenant),
        request=gateway.CallRequest(agent=agent, tool="memory_search", args=args, **context),
    ).result


def test_the_tool_answers_with_paths_headings_snippets_and_scores(tenant_a, agent):
    local(tenant_a)
    remember(tenant_a, agent, "memory/deploy.md", DEPLOY)
    remember(tenant_a, agent, "MEMORY.md", COFFEE, user_id="alice")
    result = call(agent, {"query": "shipping code to the live servers", "limit": 2}, user_id="alice")
    assert result.is_error is False, result.for_llm
    first_line = result.for_llm.splitlines()[0]
    assert first_line == (
        'Memory search for "shipping code to the live servers" (scope all; hybrid: full text + vectors of '
        "all-MiniLM-L6-v2): 2 results."
    )
    assert "1. memory/deploy.md > Deployments (score " in result.for_llm
    assert "Releases reach production" in result.for_llm
    assert "2. MEMORY.md > Coffee machine (score " in result.for_llm
    assert "your own" in result.for_llm
    assert result.data["mode"] == "hybrid"
    assert result.data["embedder"] == LOCAL_MODEL
    assert result.data["weights"] == {"text": 0.3, "vector": 0.7}
    hits = result.data["hits"]
    assert [h["path"] for h in hits] == ["memory/deploy.md", "MEMORY.md"]
    assert set(hits[0]) >= {"path", "heading", "snippet", "scope", "score", "text_score", "vector_score"}


def test_the_tool_without_an_embedder_and_without_matches(tenant_a, agent):
    remember(tenant_a, agent, "memory/coffee.md", COFFEE, embedder="")
    result = call(agent, {"query": "parking garage"})
    assert result.is_error is False
    assert result.data == {"query": "parking garage", "mode": "fts", "scope": "all", "hits": []}
    assert "full text only: no embedding model is configured): no matches." in result.for_llm
    assert "write one with write_file" in result.for_llm


def test_the_tool_refuses_bad_arguments_with_a_reason(tenant_a, agent):
    result = call(agent, {"query": "coffee", "scope": "user"})
    assert result.is_error is True
    assert result.for_llm == "memory_search: scope user needs a user: this call has none (use global)."
    result = call(agent, {"query": "x" * (MAX_QUERY_CHARS + 1)})
    assert result.is_error is True
    assert "shorten it" in result.for_llm


def test_the_tool_through_the_execute_api(member_a, outsider, tenant_a, tenant_b, agent):
    remember(tenant_a, agent, "memory/coffee.md", COFFEE, embedder="")
    body = member_a.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "memory_search", "args": {"query": "espresso descaling"}},
        format="json",
    ).json()
    assert body["is_error"] is False, body
    assert "1. memory/coffee.md > Coffee machine (score 1.00)" in body["for_llm"]
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    body = outsider.post(
        "/api/v1/runtime/execute",
        {"agent": "bot", "tool": "memory_search", "args": {"query": "espresso descaling"}},
        format="json",
    ).json()
    assert body["is_error"] is False, body
    assert "no matches" in body["for_llm"]
    assert "coffee" not in body["for_llm"].lower().replace("espresso descaling", "")


def test_a_users_document_shadows_the_global_one_at_the_same_path(tenant_a, agent):
    local(tenant_a)
    remember(tenant_a, agent, "memory/coffee.md", COFFEE)
    remember(
        tenant_a,
        agent,
        "memory/coffee.md",
        ("Coffee", "Alice's espresso machine is at home."),
        user_id="alice",
    )
    remember(tenant_a, agent, "memory/kitchen.md", COFFEE)
    query = "espresso machine"

    alice = hybrid_search(tenant_a, agent, query, user_id="alice")
    # One hit per path, and the hit at memory/coffee.md is the document memory_get opens for alice.
    assert sorted((hit.path, hit.scope) for hit in alice.hits) == [
        ("memory/coffee.md", "user"),
        ("memory/kitchen.md", "global"),
    ]
    bob = hybrid_search(tenant_a, agent, query, user_id="bob")
    assert sorted((hit.path, hit.scope) for hit in bob.hits) == [
        ("memory/coffee.md", "global"),
        ("memory/kitchen.md", "global"),
    ]
    # Asked for the global scope alone, alice sees the global document again.
    assert {
        hit.scope for hit in hybrid_search(tenant_a, agent, query, user_id="alice", scope="global").hits
    } == {"global"}


def test_a_team_member_searches_its_leads_memory_and_its_own_first(member_a, tenant_a, agent):
    from apps.teams import services as team_services

    local(tenant_a)
    system = Actor.system(tenant_a)
    lead = services.agent_create(actor=system, key="lead", name="Lead")
    worker = services.agent_create(actor=system, key="worker", name="Worker")
    team_services.team_create(actor=system, name="Crew", lead=lead, members=[worker])
    remember(tenant_a, lead, "memory/coffee.md", COFFEE)
    remember(tenant_a, lead, "memory/parking.md", PARKING, user_id="alice")
    remember(tenant_a, worker, "memory/coffee.md", ("Coffee", "The worker's espresso notes."))
    remember(tenant_a, agent, "memory/unrelated-agent.md", COFFEE)

    def search(agent_key, query, user_id=""):
        body = member_a.post(
            "/api/v1/runtime/execute",
            {
                "agent": agent_key,
                "tool": "memory_search",
                "args": {"query": query, "limit": 10},
                "context": {"user_id": user_id},
            },
            format="json",
        ).json()
        assert body["is_error"] is False, body
        return sorted(line.strip() for line in body["for_llm"].splitlines() if line[:1].isdigit())

    hits = search("worker", "espresso machine parking garage", user_id="alice")
    # The worker's own memory/coffee.md shadows the lead's; the lead's memory for alice is found.
    assert len(hits) == 2, hits
    assert hits[0].startswith("1. ") or hits[1].startswith("1. ")
    coffee = next(hit for hit in hits if "memory/coffee.md" in hit)
    parking = next(hit for hit in hits if "memory/parking.md" in hit)
    assert "team lead" not in coffee
    assert parking.endswith(", your own, the team lead's)"), parking
    # The lead itself searches its own memory only; bob does not see alice's.
    assert [hit.split(" (")[0] for hit in search("lead", "espresso machine parking garage", "bob")] == [
        "1. memory/coffee.md > Coffee machine"
    ]


def test_the_search_api_runs_the_agents_search(viewer_a, agent, tenant_a):
    local(tenant_a)
    remember(tenant_a, agent, "memory/coffee.md", COFFEE)
    remember(tenant_a, agent, "memory/alice.md", PARKING, user_id="alice")
    url = "/api/v1/agents/bot/memory-search"
    answer = viewer_a.get(url, {"q": "espresso descaling"}).json()
    assert (answer["mode"], answer["scope"]) == ("hybrid", "all")
    assert answer["hits"][0]["path"] == "memory/coffee.md"
    as_alice = viewer_a.get(url, {"q": "where do bicycles go", "user_id": "alice", "limit": 1}).json()
    assert [hit["path"] for hit in as_alice["hits"]] == ["memory/alice.md"]
    bad = viewer_a.get(url, {"q": "x", "scope": "user"})
    assert bad.status_code == 400
    assert "needs a user" in bad.json()["error"]["message"]
    assert viewer_a.get(url).status_code == 400  # q is required
    assert viewer_a.get("/api/v1/agents/nobody/memory-search", {"q": "x"}).status_code == 404
