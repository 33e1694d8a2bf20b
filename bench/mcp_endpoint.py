"""Toolgate's MCP endpoint (``/mcp/<agent key>/``) under 16 concurrent clients, against the same work
through the REST API, over one real daphne process, in the same run.

Two operations, each measured three ways:

* REST (the baseline): ``POST /api/v1/runtime/execute`` of ``datetime``, and
  ``GET /api/v1/agents/<key>/tools?format=mcp``, with an httpx client;
* MCP, raw JSON-RPC: the same ``tools/call`` and ``tools/list`` POSTed to the endpoint by the same httpx
  client (the server's cost of speaking MCP, SSE response included);
* MCP, SDK client: 16 ``ClientSession``\\s of the ``mcp`` SDK (``streamable_http_client``), each
  initialized once and reused, as MCP clients run (what a real MCP client pays, its own parsing and
  validation included).

The 16 clients share one event loop in this process, and client and server share the machine's
cores: absolute figures understate a real server, the ratios to REST measured the same way are the
figures to watch. Part of ``python -m bench`` (left out with ``--skip-http``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.http_execute import start_daphne, stop_daphne

CLIENTS = 16
WARM_UP = 20
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


@dataclass(frozen=True)
class Measured:
    label: str
    latencies_ms: list[float]
    seconds: float
    errors: int

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


Operation = Callable[[int], Awaitable[bool]]  # (client index) -> whether the answer was right


async def _drive(label: str, operation: Operation, seconds: float) -> Measured:
    for i in range(WARM_UP):  # connections, thread pools and the server's caches
        await operation(i % CLIENTS)
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            ok = await operation(index)
            latencies.append((time.perf_counter() - started) * 1000)
            errors += not ok

    began = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(CLIENTS)))
    return Measured(label, latencies, time.perf_counter() - began, errors)


def sse_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a one-message response, SSE or JSON."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])  # type: ignore[no-any-return]
    return {}


async def _measure_all(base: str, api_key: str, agent_key: str, seconds: float) -> list[list[Measured]]:
    auth = {"Authorization": f"Bearer {api_key}"}
    url = f"{base}/mcp/{agent_key}/"
    arguments: dict[str, Any] = {}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "datetime", "arguments": arguments},
    }
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with (
        httpx.AsyncClient(base_url=base, headers=auth, limits=limits, timeout=60) as http,
        contextlib.AsyncExitStack() as stack,
    ):
        sessions: list[ClientSession] = []
        for _ in range(CLIENTS):
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=auth, timeout=httpx2.Timeout(60, read=120))
            )
            read, write = await stack.enter_async_context(streamable_http_client(url, http_client=client))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        tool_count = len((await sessions[0].list_tools()).tools)

        async def rest_execute(_: int) -> bool:
            body = {"agent": agent_key, "tool": "datetime", "args": {}}
            response = await http.post("/api/v1/runtime/execute", json=body)
            return response.status_code == 200 and response.json()["is_error"] is False

        async def raw_call(_: int) -> bool:
            response = await http.post(url, json=call, headers=MCP_HEADERS)
            result = sse_result(response).get("result") or {}
            return response.status_code == 200 and result.get("isError") is False

        async def sdk_call(index: int) -> bool:
            result = await sessions[index].call_tool("datetime", {})
            return not result.is_error

        async def rest_list(_: int) -> bool:
            response = await http.get(f"/api/v1/agents/{agent_key}/tools?format=mcp")
            return response.status_code == 200 and response.json()["count"] == tool_count

        async def raw_list(_: int) -> bool:
            response = await http.post(url, json=listing, headers=MCP_HEADERS)
            result = sse_result(response).get("result") or {}
            return response.status_code == 200 and len(result.get("tools") or ()) == tool_count

        async def sdk_list(index: int) -> bool:
            return len((await sessions[index].list_tools()).tools) == tool_count

        calls = [
            await _drive("REST: POST /api/v1/runtime/execute", rest_execute, seconds),
            await _drive("MCP tools/call, raw JSON-RPC", raw_call, seconds),
            await _drive("MCP tools/call, SDK client", sdk_call, seconds),
        ]
        lists = [
            await _drive("REST: GET /api/v1/agents/<key>/tools?format=mcp", rest_list, seconds),
            await _drive("MCP tools/list, raw JSON-RPC", raw_list, seconds),
            await _drive("MCP tools/list, SDK client", sdk_list, seconds),
        ]
    return [calls, lists]


def run(*, db_name: str, api_key: str, agent_key: str, seconds: float) -> str:
    """Measure over one daphne process and return the Markdown table."""
    process, base = start_daphne(db_name)
    try:
        groups = asyncio.run(_measure_all(base, api_key, agent_key, seconds))
    finally:
        stop_daphne(process)
    lines = [
        f"{CLIENTS} concurrent clients, {seconds:g} s each, one daphne process (`datetime`; the agent's "
        "tool list):",
        "",
        "| operation | requests | req/s | p50 ms | p95 ms | errors | p50 vs REST | req/s vs REST |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for group in groups:
        baseline = group[0]
        for m in group:
            lines.append(
                f"| {m.label} | {len(m.latencies_ms)} | {m.rps:,.0f} | {m.p50:.1f} | {m.p95:.1f} "
                f"| {m.errors} | {m.p50 / baseline.p50:.2f}x | {m.rps / baseline.rps:.2f}x |"
            )
    return "\n".join(lines)
