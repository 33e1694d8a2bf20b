"""Sampling and elicitation requests of a bridged MCP server (``tests/mcp/servers/demo.py`` over stdio),
relayed to the client of the call through ``/mcp/<agent>/`` on real daphne processes, and answered as
the README says when there is no client to ask: the request goes out on the call's own SSE response,
scrubbed; the client's answer, a POST of its own, reaches the call even when it lands on another
daphne process (through the channel layer), and counts only from the same tenant and the same key."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import MCP_HEADERS, endpoint, rest
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

DEMO = Path(__file__).resolve().parent / "servers" / "demo.py"
TOKEN = "relay-token-0b7c3e9d51"


@pytest.fixture
def demo(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="demo",
        transport="stdio",
        command=sys.executable,
        args=[str(DEMO), "stdio"],
        env={"TOKEN": TOKEN},
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    # The tools as discovery stores them (discovery runs in a worker, which these tests do not start).
    for name, properties in {
        "ask_name": {"env_name": {"type": "string"}},
        "sample": {"topic": {"type": "string"}},
    }.items():
        schema = {"type": "object", "properties": properties}
        MCPServerTool.objects.create(tenant=tenant_a, server=server, name=name, input_schema=schema)
    return server


@pytest.fixture
def second(live: Any) -> Iterator[str]:
    """Another daphne process on the same database and channel layer: another web worker."""
    processes = LiveProcesses(db_name=live.db_name, label="relay-")
    try:
        yield str(processes.daphne())
    finally:
        processes.stop_all()


def text(result: types.CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_elicitation_and_sampling_reach_the_sdk_client_scrubbed_and_its_answers_the_server(
    base, tenant_a, demo
):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    asked: list[tuple[str, Any]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(("elicitation", params.message))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(("sampling", getattr(params.messages[0].content, "text", None)))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="leaves fall slowly"), model="test-model"
        )

    async def go() -> tuple[types.CallToolResult, types.CallToolResult]:
        headers = {"Authorization": f"Bearer {member}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as http,
            streamable_http_client(endpoint(base), http_client=http) as (read, write),
            ClientSession(read, write, elicitation_callback=elicit, sampling_callback=sample) as session,
        ):
            await session.initialize()
            named = await session.call_tool("mcp_demo__ask_name", {"env_name": "TOKEN"})
            sampled = await session.call_tool("mcp_demo__sample", {"topic": "autumn"})
            return named, sampled

    named, sampled = asyncio.run(go())
    assert (named.is_error, text(named)) == (False, "hello Ada")
    assert (sampled.is_error, text(sampled)) == (False, "model said: leaves fall slowly")
    assert asked == [("elicitation", "Your name, please ([REDACTED])"), ("sampling", "A haiku about autumn")]
    calls = ToolCall.objects.for_tenant(tenant_a).order_by("created_at")
    assert [(c.tool, c.status) for c in calls] == [("mcp_demo__ask_name", "ok"), ("mcp_demo__sample", "ok")]


def test_without_a_client_to_ask_elicitation_is_declined_and_sampling_refused(base, tenant_a, demo):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    with rest(base, member) as http:
        named = http.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "mcp_demo__ask_name", "args": {"env_name": "TOKEN"}},
        ).json()
        sampled = http.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "mcp_demo__sample", "args": {"topic": "x"}},
        ).json()
    assert named["for_llm"] == "no name: decline"
    assert sampled["is_error"] is True
    assert "Toolgate runs no model of its own" in sampled["for_llm"]


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


def test_an_answer_reaches_the_call_from_another_worker_and_only_from_the_same_key(
    base, second, tenant_a, tenant_b, demo
):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    colleague = factories.make_api_key(tenant_a, Role.OWNER)
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    outsider = factories.make_api_key(tenant_b, Role.OWNER)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "mcp_demo__ask_name", "arguments": {}},
    }
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2025-11-25"}

    def answer(url: str, key: str, request_id: str, name: str) -> int:
        body = {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": {"name": name}}}
        reply = httpx.post(url, json=body, headers={**headers, "Authorization": f"Bearer {key}"}, timeout=30)
        return reply.status_code

    with (
        httpx.Client(timeout=httpx.Timeout(30, read=120)) as client,
        client.stream(
            "POST", endpoint(base), json=call, headers={**headers, "Authorization": f"Bearer {member}"}
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response)
        request = next(events)
        assert request["method"] == "elicitation/create"
        request_id = request["id"]
        assert isinstance(request_id, str)
        assert request_id.startswith("tg-")
        # Answers by anyone but the caller's own key are accepted as HTTP and dropped.
        assert answer(endpoint(second), outsider, request_id, "Mallory") == 202
        assert answer(endpoint(second), colleague, request_id, "Eve") == 202
        # The caller's answer, to the other worker, reaches the call held by the first.
        assert answer(endpoint(second), member, request_id, "Grace") == 202
        final = next(events)
    assert final["id"] == 7
    assert final["result"]["content"][0]["text"] == "hello Grace"
    assert not ToolCall.objects.for_tenant(tenant_b).exists()
