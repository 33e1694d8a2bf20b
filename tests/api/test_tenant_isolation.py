"""Tenant B's credentials never see or change tenant A's data, on every API route.

The test walks the URL conf: a new API route without a case here (or in a feature module merged
below) makes it fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests import factories
from tests.api import (
    isolation_approvals,
    isolation_context_files,
    isolation_custom_tools,
    isolation_knowledge,
    isolation_llm,
    isolation_mcp,
    isolation_memory,
    isolation_messaging,
    isolation_policy,
    isolation_runs,
    isolation_sandbox,
    isolation_secure_cli,
    isolation_sessions,
    isolation_skills,
    isolation_teams,
)
from tests.api.isolation_support import (
    Case,
    _agent,
    _api_key,
    _audit_event,
    _membership,
    _nothing,
    _tool_call,
)
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

# Routes that hold no tenant data: the OpenAPI document and its viewer.
PUBLIC_ROUTES = {"schema", "api-docs"}


def api_routes() -> Iterator[str]:
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, str | None]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern.name

    for route, name in walk(get_resolver().url_patterns, ""):
        if route.startswith("api/"):
            assert name, f"API route {route} has no name"
            yield name


CASES: dict[str, Case] = {
    "me": Case(make=_nothing, own_tenant_only=True),
    "tenant": Case(make=_nothing, own_tenant_only=True),
    "tenant-quota": Case(make=_nothing, own_tenant_only=True),
    "agent-list": Case(make=_agent, collection=True),
    "agent-detail": Case(make=_agent, writes=[("patch", {"name": "hijacked"}), ("delete", None)]),
    "api-key-list": Case(make=_api_key, collection=True),
    "api-key-detail": Case(make=_api_key, writes=[("delete", None)]),
    "membership-list": Case(make=_membership, collection=True),
    "membership-detail": Case(make=_membership, writes=[("patch", {"role": "viewer"}), ("delete", None)]),
    "audit-event-list": Case(make=_audit_event, collection=True),
    "audit-event-detail": Case(make=_audit_event),
    "tool-call-list": Case(make=_tool_call, collection=True),
    "tool-call-detail": Case(make=_tool_call),
    "audit-event-export": Case(make=_audit_event, collection=True),
    "tool-call-export": Case(make=_tool_call, collection=True),
    "agent-tools": Case(make=_agent),
    "agent-mcp-resources": Case(make=_agent),
    "agent-mcp-resource-read": Case(make=_agent),
    "agent-mcp-prompts": Case(make=_agent),
    "agent-mcp-prompt-get": Case(make=_agent, writes=[("post", {"name": "mcp_lib__summarize"})]),
    "tool-catalog": Case(make=_nothing, tenant_agnostic=True),
    "runtime-execute": Case(make=_agent, post_only=True),
    "stats-tool-calls": Case(make=_tool_call, collection=True),
    "stats-top": Case(make=_tool_call, collection=True),
    "stats-needs-you": Case(make=_tool_call, collection=True),
    **isolation_policy.CASES,
    **isolation_approvals.CASES,
    **isolation_teams.CASES,
    **isolation_mcp.CASES,
    **isolation_custom_tools.CASES,
    **isolation_sandbox.CASES,
    **isolation_secure_cli.CASES,
    **isolation_context_files.CASES,
    **isolation_memory.CASES,
    **isolation_knowledge.CASES,
    **isolation_skills.CASES,
    **isolation_llm.CASES,
    **isolation_sessions.CASES,
    **isolation_messaging.CASES,
    **isolation_runs.CASES,
}


def test_every_api_route_has_an_isolation_case():
    routes = set(api_routes()) - PUBLIC_ROUTES
    missing = routes - set(CASES)
    assert not missing, f"add tenant-isolation cases for: {sorted(missing)}"
    assert not set(CASES) - routes, "cases for routes that no longer exist"


@pytest.mark.parametrize("name", sorted(CASES))
def test_tenant_b_cannot_reach_tenant_a(name, tenant_a, tenant_b, outsider):
    case = CASES[name]
    kwargs = case.make(tenant_a)
    in_path = not (case.collection or case.own_tenant_only or case.tenant_agnostic or case.post_only)
    url = reverse(name, kwargs=kwargs if in_path else {})
    before = tenant_state(tenant_a)
    a_ids = {
        str(row["id"]) for rows in before.values() if isinstance(rows, list) for row in rows if "id" in row
    }

    if case.post_only:  # the object is named in the body: B names A's agent
        named = case.body(kwargs) if case.body else {"agent": kwargs["key"], "tool": "datetime", "args": {}}
        response = outsider.post(url, named, format="json")
    else:
        response = outsider.get(url)

    if case.tenant_agnostic:
        assert response.status_code == 200
        body = response.content.decode()
        assert not [i for i in a_ids if i in body]
        assert tenant_a.slug not in body
    elif case.own_tenant_only:
        assert response.status_code == 200
        body = response.json()
        assert body.get("tenant", body)["slug"] == tenant_b.slug
        assert tenant_a.slug not in response.content.decode()
    elif case.collection:
        assert response.status_code == 200
        # An export is streamed: its body is read from the stream.
        body = b"".join(response.streaming_content if response.streaming else [response.content]).decode()
        leaked = [i for i in a_ids if i in body]
        assert not leaked, f"{name} leaked tenant A ids {leaked}"
        for value in kwargs.values():
            assert value not in body
    else:
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"

    for method, payload in case.writes:
        response = getattr(outsider, method)(url, payload, format="json")
        assert response.status_code == 404, (method, response.content)
        assert response.json()["error"]["code"] == "not_found"
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("name", ["agent-list", "api-key-list", "membership-list"])
def test_creating_through_tenant_b_never_lands_in_tenant_a(name, tenant_a, tenant_b, outsider):
    before = tenant_state(tenant_a)
    payload = {
        "agent-list": {"key": "bee", "name": "B's agent"},
        "api-key-list": {"name": "bee", "role": "viewer"},
        "membership-list": {"email": "bee@b.test", "role": "viewer", "password": factories.PASSWORD},
    }[name]

    response = outsider.post(reverse(name), payload, format="json")

    assert response.status_code == 201
    assert tenant_state(tenant_a) == before


def test_executing_another_tenants_agent_is_404_and_records_nothing(tenant_a, tenant_b, outsider):
    from apps.audit.models import ToolCall

    key = _agent(tenant_a)["key"]
    before = tenant_state(tenant_a)
    response = outsider.post(
        "/api/v1/runtime/execute", {"agent": key, "tool": "datetime", "args": {}}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert tenant_state(tenant_a) == before
    assert not ToolCall.objects.for_tenant(tenant_b).exists()
