"""The embedding-settings API (GET/PUT /api/v1/memory/embedding-settings) and the OpenAI-compatible
embedder against a real HTTP server on 127.0.0.2 (reachable through the SSRF guard's test seam)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django_q.models import OrmQ

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.memory import embedding_services, services
from apps.memory.embeddings import LOCAL_MODEL, EmbedderError, OpenAIEmbedder
from apps.memory.models import EmbeddingSettings, MemoryChunk
from apps.memory.search import hybrid_search
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.local_http import Handler, LocalServer, serving

pytestmark = pytest.mark.django_db

URL = "/api/v1/memory/embedding-settings"
PUBLIC_IP = "127.0.0.2"
API_KEY = "sk-test-embeddings-3f9c1d2e8a7b"
DIMS = 64


def fake_vector(text: str, dims: int = DIMS) -> list[float]:
    """A bag-of-words vector: texts sharing words point the same way (enough for a search test)."""
    vector = [0.0] * dims
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.strip(".,?").encode()).hexdigest(), 16) % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def embeddings_route(handler: Handler) -> None:
    """An OpenAI-compatible /v1/embeddings: checks the key, answers in reverse order with indexes."""
    if handler.headers.get("Authorization") != f"Bearer {API_KEY}":
        body = {"error": {"message": f"Incorrect API key provided: {handler.headers.get('Authorization')}"}}
        handler.reply(401, json.dumps(body).encode(), "application/json")
        return
    request = json.loads(handler.server.owner.hits[-1].body)
    data = [
        {"object": "embedding", "index": i, "embedding": fake_vector(text, request.get("dimensions") or DIMS)}
        for i, text in enumerate(request["input"])
    ]
    handler.reply(200, json.dumps({"object": "list", "data": data[::-1]}).encode(), "application/json")


@pytest.fixture
def endpoint(settings) -> Iterator[LocalServer]:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        server.routes["/v1/embeddings"] = embeddings_route
        yield server


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "memory"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def openai_body(server: LocalServer, **extra: Any) -> dict[str, Any]:
    return {"kind": "openai", "base_url": server.url("/v1"), "model": "fake-embed", **extra}


# --- the embedder -------------------------------------------------------------------------------------


def test_the_openai_embedder_posts_the_texts_with_the_key_and_orders_the_answer(endpoint):
    embedder = OpenAIEmbedder(
        base_url=endpoint.url("/v1/"), model="fake-embed", api_key=API_KEY, dimensions=32
    )
    vectors = embedder.embed(["deploy the api", "coffee machine"])
    assert vectors == [fake_vector("deploy the api", 32), fake_vector("coffee machine", 32)]
    assert embedder.name == "openai:fake-embed@32"
    hit = endpoint.hits[-1]
    assert (hit.method, hit.path) == ("POST", "/v1/embeddings")
    assert hit.headers["authorization"] == f"Bearer {API_KEY}"
    assert json.loads(hit.body) == {
        "model": "fake-embed",
        "input": ["deploy the api", "coffee machine"],
        "encoding_format": "float",
        "dimensions": 32,
    }
    assert API_KEY not in repr(embedder)


def test_the_openai_embedder_batches_and_cuts_long_texts(endpoint):
    embedder = OpenAIEmbedder(base_url=endpoint.url("/v1"), model="m", api_key=API_KEY)
    assert len(embedder.embed([f"text {i}" for i in range(130)])) == 130
    sizes = [len(json.loads(h.body)["input"]) for h in endpoint.hits]
    assert sizes == [64, 64, 2]
    embedder.embed(["x" * 50_000])
    assert len(json.loads(endpoint.hits[-1].body)["input"][0]) == 8000


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (
            lambda h: h.reply(500, b'{"error": {"message": "overloaded"}}'),
            "HTTP 500 (the endpoint failed): overloaded",
        ),
        (lambda h: h.reply(404, b"nope"), "HTTP 404 (check the base URL"),
        (lambda h: h.reply(429, b"{}"), "HTTP 429 (the endpoint's rate limit was reached"),
        (lambda h: h.reply(200, b"not json"), "answer is not JSON"),
        (lambda h: h.reply(200, b'{"data": []}'), "no 'data' list of 1 embeddings"),
        (lambda h: h.reply(200, b'{"data": [{"embedding": ["a"]}]}'), "not a list of at most 16000 finite"),
        (lambda h: h.reply(200, b'{"data": [{"embedding": [1e999]}]}'), "finite numbers"),
        (lambda h: h.reply(200, b'{"data": [{"index": 3, "embedding": [1.0]}]}'), "wrong or repeated index"),
        (
            lambda h: h.reply(200, b'{"data": [{"embedding": [1.0]}]}', content_encoding="gzip"),
            "only identity",
        ),
        (
            lambda h: h.reply(200, b'{"data": [{"embedding": [' + b"0.5, " * 7_000_000 + b"1]}]}"),
            "larger than 33554432 bytes",
        ),
    ],
)
def test_bad_answers_become_clear_embedder_errors(settings, route, message):
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        server.routes["/v1/embeddings"] = route
        embedder = OpenAIEmbedder(base_url=server.url("/v1"), model="m", api_key=API_KEY)
        with pytest.raises(EmbedderError, match=re.escape(message)):
            embedder.embed(["hello"])


def test_a_refused_key_is_never_repeated_in_the_error(endpoint):
    embedder = OpenAIEmbedder(base_url=endpoint.url("/v1"), model="m", api_key="sk-wrong-key-123456")
    with pytest.raises(EmbedderError) as raised:
        embedder.embed(["hello"])
    assert "HTTP 401 (the API key was refused" in str(raised.value)
    assert "sk-wrong-key-123456" not in str(raised.value)
    assert "[redacted]" in str(raised.value)


def test_private_addresses_are_refused_before_any_request(settings):
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with serving("127.0.0.1") as internal:
        internal.routes["/v1/embeddings"] = embeddings_route
        embedder = OpenAIEmbedder(base_url=internal.url("/v1"), model="m", api_key=API_KEY)
        with pytest.raises(EmbedderError, match="must be a public http"):
            embedder.embed(["hello"])
        assert internal.hits == []


def test_an_endpoint_that_does_not_answer_times_out(settings, monkeypatch):
    from apps.memory import embeddings

    monkeypatch.setattr(embeddings, "OPENAI_READ_TIMEOUT", 0.3)
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        server.routes["/v1/embeddings"] = lambda h: __import__("time").sleep(1.5)
        with pytest.raises(EmbedderError, match="timed out"):
            OpenAIEmbedder(base_url=server.url("/v1"), model="m", api_key=API_KEY).embed(["hello"])


# --- the API ------------------------------------------------------------------------------------------


def test_the_default_is_no_embedder(admin_a):
    assert admin_a.get(URL).json() == {
        "kind": "none",
        "base_url": "",
        "model": "",
        "dimensions": None,
        "api_key_set": False,
        "embedder": "",
        "local_model": {"name": LOCAL_MODEL, "dimensions": 384},
    }


def test_an_endpoint_is_saved_with_a_write_only_key_audited_and_published(
    admin_a, tenant_a, endpoint, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_a.put(URL, openai_body(endpoint, api_key=API_KEY, dimensions=48), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["kind"] == "openai"
    assert body["base_url"] == endpoint.url("/v1")
    assert (body["model"], body["dimensions"], body["api_key_set"]) == ("fake-embed", 48, True)
    assert body["embedder"] == "openai:fake-embed@48"
    assert API_KEY not in response.content.decode()
    assert API_KEY not in admin_a.get(URL).content.decode()
    row = EmbeddingSettings.objects.for_tenant(tenant_a).get()
    assert row.api_key == API_KEY
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="memory.embedding_settings.updated")
    assert event.data["api_key_set"] is True
    assert event.data["api_key_changed"] is True
    assert API_KEY not in json.dumps(event.data)
    [live] = [e for e in published() if e["type"] == "memory.embedding_settings_updated"]
    assert live["data"]["embedder"] == "openai:fake-embed@48"
    assert API_KEY not in json.dumps(live)

    # Leaving the key out keeps it; an empty key clears it.
    kept = admin_a.put(URL, openai_body(endpoint), format="json").json()
    assert kept["api_key_set"] is True
    assert EmbeddingSettings.objects.for_tenant(tenant_a).get().api_key == API_KEY
    cleared = admin_a.put(URL, openai_body(endpoint, api_key=""), format="json").json()
    assert cleared["api_key_set"] is False
    # Back to none forgets the endpoint and its key.
    none = admin_a.put(URL, {"kind": "none"}, format="json").json()
    assert (none["kind"], none["base_url"], none["api_key_set"]) == ("none", "", False)


def test_saving_the_same_settings_again_changes_nothing(admin_a, tenant_a):
    admin_a.put(URL, {"kind": "local"}, format="json")
    before = tenant_state(tenant_a)
    assert admin_a.put(URL, {"kind": "local"}, format="json").status_code == 200
    assert tenant_state(tenant_a) == before


def test_a_new_embedder_indexes_the_memory_again_and_search_uses_it(
    admin_a, tenant_a, agent, endpoint, django_capture_on_commit_callbacks
):
    from apps.memory import tasks

    document, _ = services.document_write(
        actor=Actor.system(tenant_a),
        agent=agent,
        user_id="",
        path="memory/deploy.md",
        content="# Deployments\n\nReleases reach production through the pipeline.",
    )
    tasks.index_document(str(tenant_a.pk), str(document.pk))
    assert list(MemoryChunk.objects.for_tenant(tenant_a).values_list("embedder", flat=True)) == [""]
    OrmQ.objects.all().delete()

    with django_capture_on_commit_callbacks(execute=True):
        admin_a.put(URL, openai_body(endpoint, api_key=API_KEY), format="json")
    [job] = [
        task for task in OrmQ.objects.all() if task.func() == "apps.memory.embedding_services.reindex_tenant"
    ]
    assert job.task["args"] == (str(tenant_a.pk),)
    assert embedding_services.reindex_tenant(str(tenant_a.pk)) == 1
    chunk = MemoryChunk.objects.for_tenant(tenant_a).get()
    assert chunk.embedder == "openai:fake-embed"
    assert len(chunk.embedding) == DIMS

    result = hybrid_search(tenant_a, agent, "pipeline releases")
    assert result.mode == "hybrid"
    assert result.embedder == "openai:fake-embed"
    assert result.hits[0].path == "memory/deploy.md"
    assert result.hits[0].vector_score > 0.5
    assert embedding_services.reindex_tenant(str(tenant_a.pk)) == 0  # nothing pending: idempotent


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"kind": "openai", "model": "m"}, "base_url", "required for kind openai"),
        ({"kind": "openai", "base_url": "https://api.example.com/v1"}, "model", "required for kind openai"),
        (
            {"kind": "openai", "base_url": "http://127.0.0.1:8080/v1", "model": "m"},
            "base_url",
            "public http(s)",
        ),
        ({"kind": "openai", "base_url": "http://169.254.169.254/v1", "model": "m"}, "base_url", "blocked"),
        ({"kind": "openai", "base_url": "file:///etc/passwd", "model": "m"}, "base_url", "scheme"),
        (
            {"kind": "openai", "base_url": "https://u:p@api.example.com/v1", "model": "m"},
            "base_url",
            "user name",
        ),
        (
            {"kind": "openai", "base_url": "https://api.example.com/v1?x=1", "model": "m"},
            "base_url",
            "no query",
        ),
        ({"kind": "openai", "base_url": "https://a.example.com/ v1", "model": "m"}, "base_url", "whitespace"),
        ({"kind": "openai", "base_url": "https://a.example.com/v1", "model": "m\x07m"}, "model", "control"),
        (
            {"kind": "openai", "base_url": "https://a.example.com/v1", "model": "m", "api_key": "a\nb"},
            "api_key",
            "line breaks",
        ),
        (
            {"kind": "openai", "base_url": "https://a.example.com/v1", "model": "m", "dimensions": 0},
            "dimensions",
            "greater than or equal to 1",
        ),
        ({"kind": "local", "base_url": "https://a.example.com/v1"}, "base_url", "only for kind openai"),
        ({"kind": "none", "api_key": "k"}, "api_key", "only for kind openai"),
        ({"kind": "cloud"}, "kind", "not a valid choice"),
        ({}, "kind", "required"),
        ({"kind": "local", "extra": 1}, "extra", ""),
    ],
)
def test_invalid_settings_are_refused_with_the_field_and_change_nothing(
    admin_a, tenant_a, body, field, message
):
    before = tenant_state(tenant_a)
    envelope = error(admin_a.put(URL, body, format="json"), 400, "invalid")
    assert field in envelope["details"], envelope
    assert message in " ".join(envelope["details"][field]), envelope
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(("method", "body"), [("get", None), ("put", {"kind": "local"})])
def test_only_administrators_reach_the_settings(request, tenant_a, method, body):
    EmbeddingSettings.objects.create(
        tenant=tenant_a,
        kind="openai",
        base_url="https://a-secret.example.com/v1",
        model="a-model",
        api_key="k",
    )
    check_personas(
        request,
        tenant_a,
        method=method,
        url=URL,
        body=body,
        least="admin",
        success=200,
        outsider_status=200,
        never_shown_to_outsider=("a-secret.example.com", "a-model"),
    )


def test_another_tenant_changes_only_its_own_settings(tenant_a, tenant_b, outsider):
    EmbeddingSettings.objects.create(tenant=tenant_a, kind="local")
    before = tenant_state(tenant_a)
    assert outsider.get(URL).json()["kind"] == "none"
    assert outsider.put(URL, {"kind": "none"}, format="json").status_code == 200
    assert outsider.put(URL, {"kind": "local"}, format="json").json()["kind"] == "local"
    assert tenant_state(tenant_a) == before
    assert EmbeddingSettings.objects.for_tenant(tenant_b).get().kind == "local"
