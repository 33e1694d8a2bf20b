"""The access-request flow end to end on a real daphne: a member asks through the API, the request
arrives live on the administrators' ``mcp`` topic, an administrator approves it through the API, the
tools appear in the agent's list and in the policy's explanation, and the requester's ``me`` topic gets
the decision (nobody else's does). A rejection grants nothing and changes no tool list."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.mcp_grants.models import AgentGrant, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.mcp.live_servers import stdio_fields
from tests.mcp.support import make_server
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

REQUESTS = "/api/v1/mcp/requests/"


@pytest.fixture
def daphne(live: LiveProcesses) -> str:
    return live.daphne()


@pytest.fixture
def sockets() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as stack:
        yield stack


class Persona:
    """One API key of a tenant: its HTTP client and an events socket subscribed to ``topics``."""

    def __init__(
        self,
        live: LiveProcesses,
        base_url: str,
        sockets: contextlib.ExitStack,
        tenant: Tenant,
        role: str,
        name: str,
        topics: list[str],
    ) -> None:
        key, raw = tenant_services.api_key_create(actor=Actor.system(tenant), name=name, role=role)
        self.id = str(key.pk)
        self.http = sockets.enter_context(
            httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=15)
        )
        self.socket: EventSocket = sockets.enter_context(open_socket(live.ws_url, api_key=raw))
        assert self.socket.recv()["type"] == "hello"
        self.socket.subscribe(topics)

    def ok(self, method: str, url: str, status: int = 200, **kwargs: Any) -> Any:
        response = self.http.request(method, url, **kwargs)
        assert response.status_code == status, response.text
        return response.json()

    def mcp_tools(self, agent: str = "bot") -> list[str]:
        body = self.ok("GET", f"/api/v1/agents/{agent}/tools?format=mcp")
        return sorted(t["name"] for t in body["tools"] if t["name"].startswith("mcp_"))

    def explained(self, agent: str = "bot") -> list[str]:
        body = self.ok("GET", f"/api/v1/agents/{agent}/tools/explain")
        return sorted(name for name in body["allowed"] if name.startswith("mcp_"))

    def call(self, tool: str, args: dict[str, Any], agent: str = "bot") -> Any:
        return self.ok("POST", "/api/v1/runtime/execute", json={"agent": agent, "tool": tool, "args": args})


def assert_refused(result: dict[str, Any], tool: str) -> None:
    """A call the agent may not make: an error result naming the tool, and the server never ran it."""
    assert result["is_error"], result
    assert result["for_llm"].startswith((f"unknown tool: {tool}.", f"tool not allowed by policy: {tool}")), (
        result
    )


def test_a_request_is_asked_seen_live_approved_and_its_tools_appear(
    live, daphne, sockets, tenant_a, tenant_b
):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    # A real MCP server (stdio, made with the SDK); its tools as discovery stores them.
    server = make_server(tenant_a, "pg", [], **stdio_fields())
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    MCPServerTool.objects.create(tenant=tenant_a, server=server, name="echo", input_schema=text)
    for name in ("counter", "pid"):
        MCPServerTool.objects.create(tenant=tenant_a, server=server, name=name)
    persona = partial(Persona, live, daphne, sockets)
    admin = persona(tenant_a, Role.ADMIN, "admin", ["mcp"])
    alice = persona(tenant_a, Role.MEMBER, "alice", ["me"])
    bob = persona(tenant_a, Role.MEMBER, "bob", ["me"])
    foreign = persona(tenant_b, Role.OWNER, "b-owner", ["me", "mcp"])
    assert alice.mcp_tools() == alice.explained() == []
    assert_refused(alice.call("mcp_pg__echo", {"text": "hello"}), "mcp_pg__echo")

    asked = alice.ok(
        "POST",
        REQUESTS,
        201,
        json={
            "server": "pg",
            "scope": "agent",
            "agent": "bot",
            "tool_allow": ["echo", "counter"],
            "reason": "reports",
        },
    )
    arrived = admin.socket.wait_for(
        partial(event_of, topic="mcp", type="mcp.request.created", id=asked["id"])
    )
    assert arrived["event"]["data"]["reason"] == "reports"
    assert arrived["event"]["data"]["requester"] == {"kind": "api_key", "id": alice.id}
    pending = admin.ok("GET", REQUESTS + "?status=pending")["results"]
    assert [r["id"] for r in pending] == [asked["id"]]

    approved = admin.ok(
        "POST",
        REQUESTS + asked["id"] + "/approve",
        json={"note": "read-only for now", "tool_allow": ["echo"]},
    )
    assert approved["status"] == "approved"

    told = alice.socket.wait_for(partial(event_of, topic="me", type="mcp.request.approved", id=asked["id"]))
    assert told["event"]["tenant"] == tenant_a.slug
    assert told["event"]["data"]["review_note"] == "read-only for now"
    assert alice.mcp_tools() == alice.explained() == ["mcp_pg__echo"]
    called = alice.call("mcp_pg__echo", {"text": "hello"})
    assert (called["is_error"], called["for_llm"]) == (False, "hello")
    assert_refused(alice.call("mcp_pg__counter", {}), "mcp_pg__counter")  # narrowed away
    admin.socket.wait_for(partial(event_of, topic="mcp", type="mcp.request.approved", id=asked["id"]))

    # Bob asks for more and is turned down: his socket gets his decision only, and nothing is granted.
    grant_before = AgentGrant.objects.for_tenant(tenant_a).values("tool_allow", "enabled", "updated_at").get()
    more = bob.ok("POST", REQUESTS, 201, json={"server": "pg", "scope": "agent", "agent": "bot"})
    admin.socket.wait_for(partial(event_of, topic="mcp", type="mcp.request.created", id=more["id"]))
    admin.ok("POST", REQUESTS + more["id"] + "/reject", json={"note": "ask for what you need"})
    bob.socket.wait_for(partial(event_of, topic="me", type="mcp.request.rejected", id=more["id"]))
    assert (
        AgentGrant.objects.for_tenant(tenant_a).values("tool_allow", "enabled", "updated_at").get()
        == grant_before
    )
    assert bob.mcp_tools() == bob.explained() == ["mcp_pg__echo"]
    assert_refused(bob.call("mcp_pg__pid", {}), "mcp_pg__pid")

    # B hears only about B.
    foreign.ok(
        "POST", "/api/v1/mcp/servers/", 201, json={"name": "b-marker", "transport": "stdio", "command": "npx"}
    )
    foreign.socket.wait_for(partial(event_of, topic="mcp", type="mcp.server.created", name="b-marker"))
    assert [e["type"] for e in foreign.socket.events()] == ["mcp.server.created"]
    assert [e["data"]["id"] for e in alice.socket.events()] == [asked["id"]]
    assert [e["data"]["id"] for e in bob.socket.events()] == [more["id"]]
