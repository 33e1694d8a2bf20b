"""Every route of the API, from the published OpenAPI document, with hostile input: never a server error,
the error envelope on every refusal, and nothing changed; and every GET free of side effects."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.apps import apps
from drf_spectacular.generators import SchemaGenerator

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.scoping import TenantScoped
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch")
PLACEHOLDERS = {"key": "bot", "name": "srv", "path": "MEMORY.md", "channel": "telegram"}
JSON = "application/json"


def _routes() -> list[tuple[str, list[str]]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (path, sorted(method for method in ops if method != "parameters"))
        for path, ops in schema["paths"].items()
    ]


def _url(path: str, ids: dict[str, str] | None = None) -> str:
    """``path`` with its parameters filled: ``{id}`` by the object created for the route's collection
    (``ids``, keyed by the path's first segment), the others by the names the fixture created."""
    ids = ids or {}
    segment = path.removeprefix("/api/v1/").split("/")[0]

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "id" and segment in ids:
            return ids[segment]
        return PLACEHOLDERS.get(name, "1")

    return re.sub(r"\{(\w+)\}", fill, path)


def _every_row() -> dict[str, int]:
    counts = {}
    for model in apps.get_models():
        manager: Any = model._default_manager
        rows = manager.dangerously_all_tenants() if issubclass(model, TenantScoped) else manager.all()
        counts[model._meta.label] = rows.count()
    return counts


# Reading an export is itself recorded (exports are audited): the rows a GET may add, as it starts and
# once its last row is written.
EXPORT_VERBS = (
    "audit.exported",
    "tool_calls.exported",
    "audit.export_finished",
    "tool_calls.export_finished",
)


def _without_exports(counts: dict[str, int]) -> dict[str, int]:
    exported = AuditEvent.objects.dangerously_all_tenants().filter(verb__in=EXPORT_VERBS).count()
    return {**counts, "audit.AuditEvent": counts["audit.AuditEvent"] - exported}


def _state_without_exports(state: dict[str, Any]) -> dict[str, Any]:
    events = [e for e in state.get("audit.AuditEvent", []) if e["verb"] not in EXPORT_VERBS]
    return {**state, "audit.AuditEvent": events}


def _check(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.content[:500]!r}"
    if response.status_code >= 400 and response.content:
        body = response.json()
        assert set(body) == {"error"}, f"{what}: {body}"
        assert set(body["error"]) == {"code", "message", "details"}, f"{what}: {body}"


@pytest.fixture
def world(tenant_a):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    services.agent_create(actor=Actor.system(tenant_a), key="helper", name="Helper")
    return tenant_a


def _created(client: Any, url: str, body: dict[str, Any], method: str = "post") -> str:
    response = client.generic(method.upper(), url, json.dumps(body), content_type=JSON)
    assert response.status_code in (200, 201), f"{url}: {response.content[:300]!r}"
    return str(response.json().get("id", ""))


@pytest.fixture
def objects(world, admin_a) -> dict[str, str]:
    """Real objects behind the routes' ids, created through the API."""
    ids = {
        "teams": _created(admin_a, "/api/v1/teams/", {"name": "Team", "lead": "bot", "members": ["helper"]}),
        "sessions": _created(admin_a, "/api/v1/sessions/", {"agent": "bot", "key": "s1"}),
        "api-keys": str(admin_a.get("/api/v1/api-keys/").json()["results"][0]["id"]),
    }
    _created(admin_a, "/api/v1/agents/bot/memory/MEMORY.md", {"content": "hello"}, "put")
    event = admin_a.get("/api/v1/audit/events/").json()["results"][0]
    ids["audit"] = str(event["id"])
    return ids


BAD_BODIES: list[tuple[str, str | bytes, str]] = [
    ("invalid JSON", '{"a": ', JSON),
    ("an array", "[1, 2]", JSON),
    ("a non-finite number", '{"a": 1e999}', JSON),
    ("NaN", '{"a": NaN}', JSON),
    ("a NUL", '{"a": "x\\u0000y"}', JSON),
    ("a NUL key", '{"a\\u0000": 1}', JSON),
    ("duplicate keys", '{"a": 1, "a": 2}', JSON),
    ("invalid UTF-8", b'{"a": "\xff"}', JSON),
    ("a wrong content type", "a=1&b=2", "application/x-www-form-urlencoded"),
    ("XML", "<a/>", "application/xml"),
    ("no content type", '{"a": 1}', ""),
]


def test_hostile_input_on_every_route(admin_a, objects, world, settings):
    before, rows = tenant_state(world), _every_row()
    oversized = '{"a": "' + "x" * (settings.MAX_REQUEST_BODY_BYTES + 1) + '"}'
    for path, methods in _routes():
        url = _url(path, objects)
        _check(admin_a.options(url), f"OPTIONS {url}")
        _check(admin_a.head(url), f"HEAD {url}")
        _check(admin_a.generic("GET", url, '{"junk": ', content_type=JSON), f"GET {url} with a body")
        for method in methods:
            if method not in WRITES:
                continue
            for what, body, content_type in BAD_BODIES:
                response = admin_a.generic(method.upper(), url, body, content_type=content_type)
                _check(response, f"{method.upper()} {url} with {what}")
                assert response.status_code >= 400, f"{method.upper()} {url} accepted {what}"
            response = admin_a.generic(method.upper(), url, oversized, content_type=JSON)
            _check(response, f"{method.upper()} {url} oversized")
            assert response.status_code == 413, f"{method.upper()} {url} oversized: {response.status_code}"
    assert _without_exports(_every_row()) == rows
    assert _state_without_exports(tenant_state(world)) == before


def test_get_changes_nothing(admin_a, objects, world):
    """Every GET route, on real objects, as an admin: no row of any table changes and no audit row is
    written."""
    before, rows = tenant_state(world), _every_row()
    reached = 0
    for path, methods in _routes():
        if "get" not in methods:
            continue
        url = _url(path, objects)
        response = admin_a.get(url)
        _check(response, f"GET {url}")
        reached += response.status_code == 200
    assert _without_exports(_every_row()) == rows
    assert _state_without_exports(tenant_state(world)) == before
    assert reached > 40
