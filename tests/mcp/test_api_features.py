"""The resources and prompts of an agent's MCP servers over REST (``/api/v1/agents/<key>/mcp/...``),
against a real SDK server over stdio (``tests/mcp/servers/library.py``): the same listings, reads and
gets as ``/mcp/<agent>/``, scrubbed and recorded alike, hidden by the grant's switches and the policy,
errors in the envelope; the personas on each route, another tenant's agent 404 with nothing changed."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from apps.audit.models import ToolCall
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServer
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.api.personas import check_personas, error

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

LIBRARY = Path(__file__).resolve().parent / "servers" / "library.py"
TOKEN = "rest-lib-token-3c9e1a7f"
BASE = "/api/v1/agents/bot/mcp/"


@pytest.fixture
def library(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = services.server_create(
        actor=Actor.system(tenant_a),
        name="lib",
        transport="stdio",
        command=sys.executable,
        args=[str(LIBRARY), "stdio"],
        env={"LIBRARY_TOKEN": TOKEN},
    )
    services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    return server


def test_resources_are_listed_read_scrubbed_and_recorded(tenant_a, library, member_a, viewer_a):
    listed = viewer_a.get(BASE + "resources")
    assert listed.status_code == 200, listed.content
    body = listed.json()
    uris = [item["uri"] for item in body["resources"]]
    assert "library://readme" in uris
    assert "library://token" in uris
    assert [t["uriTemplate"] for t in body["resource_templates"]] == [
        "library://books/{book}",
        "library://zeros/{size}",
    ]

    read = member_a.get(BASE + "resources/read", {"uri": "library://token"})
    assert read.status_code == 200, read.content
    [content] = read.json()["contents"]
    assert TOKEN not in content["text"]
    assert "[REDACTED]" in content["text"]
    pixel = member_a.get(BASE + "resources/read", {"uri": "library://pixel"}).json()["contents"][0]
    assert base64.b64decode(pixel["blob"]).startswith(b"\x89PNG")
    rows = ToolCall.objects.for_tenant(tenant_a).filter(tool="resources/read").order_by("created_at")
    assert [row.args["uri"] for row in rows] == ["library://token", "library://pixel"]

    missing = error(member_a.get(BASE + "resources/read", {"uri": "nowhere://x"}), 502, "unavailable")
    assert "lib" in missing["message"]
    error(member_a.get(BASE + "resources/read"), 400, "invalid")


def test_prompts_are_listed_and_got_with_arguments(tenant_a, library, member_a, admin_a):
    prompts = member_a.get(BASE + "prompts").json()["prompts"]
    assert [p["name"] for p in prompts] == ["mcp_lib__summarize", "mcp_lib__token_prompt"]
    got = member_a.post(
        BASE + "prompts/get", {"name": "mcp_lib__summarize", "arguments": {"topic": "tides"}}, format="json"
    )
    assert got.status_code == 200, got.content
    assert got.json()["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarize tides in 50 words."}}
    ]
    token = member_a.post(BASE + "prompts/get", {"name": "mcp_lib__token_prompt"}, format="json").json()
    assert TOKEN not in str(token)
    assert ToolCall.objects.for_tenant(tenant_a).filter(tool="prompts/get").count() == 2

    error(member_a.post(BASE + "prompts/get", {"name": "mcp_x__y"}, format="json"), 404, "not_found")
    bad = member_a.post(
        BASE + "prompts/get", {"name": "mcp_lib__summarize", "arguments": {"topic": 3}}, format="json"
    )
    error(bad, 400, "invalid")

    # The grant's switch and the policy hide them here as on the MCP endpoint.
    switched = admin_a.put("/api/v1/mcp/servers/lib/grants/agents/bot/", {"prompts": False}, format="json")
    assert switched.status_code == 200, switched.content
    assert member_a.get(BASE + "prompts").json()["prompts"] == []
    admin_a.put("/api/v1/mcp/servers/lib/grants/agents/bot/", {"prompts": True}, format="json")
    denied = admin_a.put("/api/v1/policy/tenant/", {"document": {"deny": ["mcp_lib__*"]}}, format="json")
    assert denied.status_code == 200, denied.content
    assert member_a.get(BASE + "prompts").json()["prompts"] == []
    assert member_a.get(BASE + "resources").json()["resources"] == []


def test_reads_and_gets_count_against_the_sessions_calls_per_hour(tenant_a, library, member_a, admin_a):
    limited = admin_a.put("/api/v1/policy/tenant/", {"document": {"rate_limit_per_hour": 3}}, format="json")
    assert limited.status_code == 200, limited.content
    scope = "?session_key=s1"
    call = {"agent": "bot", "tool": "datetime", "args": {}, "context": {"session_key": "s1"}}
    assert member_a.post("/api/v1/runtime/execute", call, format="json").json()["is_error"] is False
    read = member_a.get(BASE + "resources/read" + scope + "&uri=library://readme")
    assert read.status_code == 200, read.content
    got = member_a.post(
        BASE + "prompts/get" + scope,
        {"name": "mcp_lib__summarize", "arguments": {"topic": "a"}},
        format="json",
    )
    assert got.status_code == 200, got.content
    over = error(member_a.get(BASE + "resources/read" + scope + "&uri=library://readme"), 429, "rate_limited")
    assert "s1" in over["message"]
    error(
        member_a.post(BASE + "prompts/get" + scope, {"name": "mcp_lib__summarize"}, format="json"),
        429,
        "rate_limited",
    )
    refused = ToolCall.objects.for_tenant(tenant_a).filter(decision="rate_limited")
    assert sorted(refused.values_list("tool", flat=True)) == ["prompts/get", "resources/read"]
    # Another session has its own budget.
    assert member_a.get(BASE + "resources/read?session_key=s2&uri=library://readme").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "least"),
    [
        ("get", "resources", None, "viewer"),
        ("get", "resources/read?uri=library://readme", None, "member"),
        ("get", "prompts", None, "viewer"),
        ("post", "prompts/get", {"name": "mcp_lib__summarize", "arguments": {"topic": "x"}}, "member"),
    ],
)
def test_personas(method, path, body, least, request, tenant_a, library):
    mcp_client.refresh(library)  # connected (and its status stored) before the state is compared
    check_personas(
        request,
        tenant_a,
        method=method,
        url=BASE + path,
        body=body,
        least=least,
        success=200,
        outsider_status=404,
        never_shown_to_outsider=("library://", "summarize"),
    )
