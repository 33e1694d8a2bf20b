"""A bridged MCP server of the 2026-07-28 era only (``tests/mcp/servers/modern.py`` over stdio: it
refuses ``initialize``), through the bridge and ``/mcp/<agent>/`` on a real daphne: discovered, called,
its progress and log messages passed on (the log level riding each request's ``_meta``), and its
elicitation (an ``InputRequiredResult``) relayed to the client of the call, or declined without one."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from apps.audit.models import ToolCall
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import endpoint, rest

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
    pytest.mark.usefixtures("mcp_connections"),
]

MODERN = Path(__file__).resolve().parent / "servers" / "modern.py"


@pytest.fixture
def modern(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="modern",
        transport="stdio",
        command=sys.executable,
        args=[str(MODERN)],
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    return server


def test_a_2026_only_server_is_discovered_and_its_tools_called_relayed_and_chatty(base, tenant_a, modern):
    mcp_client.refresh(modern)  # discovery in this process, as the worker runs it
    names = set(
        MCPServerTool.objects.for_tenant(tenant_a).filter(server=modern).values_list("name", flat=True)
    )
    assert names == {"echo", "chatty", "ask_name"}
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=modern.pk).status == "connected"

    member = factories.make_api_key(tenant_a, Role.MEMBER)
    heard: list[tuple[Any, ...]] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(("log", params.level, params.data))

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(("progress", progress, message))

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        heard.append(("elicitation", params.message))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def go() -> list[types.CallToolResult]:
        headers = {"Authorization": f"Bearer {member}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http,
            streamable_http_client(endpoint(base), http_client=http) as (read, write),
            ClientSession(read, write, logging_callback=log, elicitation_callback=elicit) as session,
        ):
            await session.initialize()  # the client speaks 2025-11-25 to Toolgate; Toolgate 2026-07-28 on
            return [
                await session.call_tool("mcp_modern__echo", {"text": "hi"}),
                await session.call_tool("mcp_modern__chatty", {"text": "x"}, progress_callback=progress),
                await session.call_tool("mcp_modern__ask_name", {"text": "q"}),
            ]

    echo, chatty, named = asyncio.run(go())
    assert [block.text for block in echo.content if isinstance(block, types.TextContent)] == [
        "2026-07-28: hi"
    ]
    assert not chatty.is_error
    assert [getattr(block, "text", "") for block in named.content] == ["hello Ada"]
    assert heard == [
        ("progress", 1.0, "step 1"),
        ("progress", 2.0, "step 2"),
        ("log", "info", "info x"),
        ("log", "error", "error x"),
        ("elicitation", "Your name, please (q)"),
    ]
    statuses = ToolCall.objects.for_tenant(tenant_a).values_list("status", flat=True)
    assert list(statuses) == ["ok", "ok", "ok"]

    # Through the REST API there is no client to ask: the elicitation is declined.
    with rest(base, member) as http:
        body = http.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "mcp_modern__ask_name", "args": {"text": "q"}},
        ).json()
    assert body["for_llm"] == "no name: decline"

    # A resource read and a prompt get that ask for input the 2026-07-28 way are driven too; through the
    # REST API there is no client to ask, so the elicitation is declined and the server's answer for
    # that comes back (not an error).
    with rest(base, member) as http:
        read = http.get("/api/v1/agents/bot/mcp/resources/read", params={"uri": "modern://greeting"})
        prompts = http.get("/api/v1/agents/bot/mcp/prompts").json()["prompts"]
        [greet] = [p["name"] for p in prompts if p["name"].endswith("greet")]
        got = http.post("/api/v1/agents/bot/mcp/prompts/get", json={"name": greet, "arguments": {}})
    assert read.status_code == 200, read.text
    assert [c["text"] for c in read.json()["contents"]] == ["no name: decline"]
    assert got.status_code == 200, got.text
    assert [m["content"]["text"] for m in got.json()["messages"]] == ["no name: decline"]
