"""Talking to Toolgate's MCP endpoint the way MCP clients do: the SDK's own client
(``streamable_http_client`` + ``ClientSession``) over real HTTP, and the REST API next to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "1"},
    },
}
CALL_DATETIME = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "datetime", "arguments": {"timezone": "UTC"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def endpoint(base: str, agent: str = "bot", query: str = "", *, slash: bool = True) -> str:
    return f"{base}/mcp/{agent}{'/' if slash else ''}{'?' + query if query else ''}"


@contextlib.asynccontextmanager
async def session(
    url: str, key: str | None, *, read_timeout: float = 60, modern: bool = False
) -> AsyncIterator[ClientSession]:
    """An SDK client session on ``url``, authenticated with ``key``: initialized (the handshake
    protocol versions), or with ``modern`` on the 2026-07-28 protocol (``server/discover``, no
    handshake)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx2.Timeout(30, read=read_timeout)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        if modern:
            await client.discover()
        else:
            await client.initialize()
        yield client


def wire(tool: types.Tool) -> dict[str, Any]:
    """A tool as it travelled (the JSON of ``tools/list``)."""
    return tool.model_dump(by_alias=True, exclude_none=True, mode="json")


def list_tools(url: str, key: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with session(url, key) as client:
            result = await client.list_tools()
        assert result.next_cursor is None
        return [wire(tool) for tool in result.tools]

    return asyncio.run(go())


def call_tool(url: str, key: str, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    async def go() -> types.CallToolResult:
        async with session(url, key, read_timeout=150) as client:
            return await client.call_tool(name, arguments or {})

    return asyncio.run(go())


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def rest(base: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def rest_tools(base: str, key: str, agent: str = "bot", query: str = "") -> list[dict[str, Any]]:
    with rest(base, key) as client:
        response = client.get(f"/api/v1/agents/{agent}/tools?format=mcp{'&' + query if query else ''}")
    assert response.status_code == 200, response.text
    tools: list[dict[str, Any]] = response.json()["tools"]
    return tools


def post(
    url: str, body: Any, *, key: str | None = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    """One raw POST to the endpoint (what reaches it before any MCP session exists)."""
    sent = {**MCP_HEADERS, **({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})}
    with httpx.Client(timeout=60) as client:
        return client.post(url, json=body, headers=sent)
