"""A tool call through Toolgate's MCP bridge against the same call made directly with the SDK.

The demo MCP server of the tests (``tests/mcp/servers/demo.py``) is registered for the bench tenant
twice, over stdio and over streamable HTTP (a local process on 127.0.0.2), and granted to one agent.
Measured one call at a time (latency, not throughput), each for the same number of seconds:

* direct: the SDK's own client (``stdio_client`` or ``streamable_http_client``, and ``ClientSession``)
  on one reused session: the floor;
* bridge: ``apps.runtime.pipeline.execute`` in this process: policy, call-time grant check, schema
  check, rate limit, the call over the manager's reused connection, result mapping, scrubbing, the
  ToolCall row and its live event;
* HTTP: ``POST /api/v1/runtime/execute`` on a daphne process (what an agent loop pays), against the
  bare authenticated endpoint (``bench.urls.AuthedView``) on the same process, one request at a time
  too; left out with ``--skip-http``.

Two tools: ``echo`` (no work: the pure overhead) and ``sleep`` 10 ms (a tool that does some work, as
real ones do). Goals: a median through the bridge of at most 1.3x the direct call; for ``echo``, at
most 1 ms added by the pipeline in-process (bridge minus direct), and HTTP execute at most 2x the
authenticated baseline. The bridge's database statements and CPU time per call are counted too, the
whole process's and the calling thread's (the pipeline's own steps: the MCP client runs on the
manager's thread); the difference between the time added and the calling thread's CPU is waiting. On a
shared machine CPU time and statements compare across runs; wall times only within one run.

Part of ``python -m bench`` (alone: ``python -m bench --only-mcp-bridge``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

GOAL_RATIO = 1.3
GOAL_ADDED_MS = 1.0  # the pipeline's own part for a tool that does nothing, in-process
GOAL_HTTP_RATIO = 2.0  # HTTP execute against the authenticated baseline, one request at a time
AGENT_KEY = "agent-02"
TOOLS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("echo", {"text": "bench"}, "bench"),
    ("sleep", {"seconds": 0.01}, "slept 0.01"),
)


def _median_ms(latencies: list[float]) -> float:
    return statistics.median(latencies) * 1000


def _timed(call: Callable[[], None], seconds: float) -> list[float]:
    for _ in range(20):
        call()
    latencies = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)
    return latencies


@contextlib.asynccontextmanager
async def _sdk_session(transport: str, url: str) -> Any:
    """The SDK's own client on one session, as an MCP client runs it."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    from tests.mcp.live_servers import DEMO

    async with contextlib.AsyncExitStack() as stack:
        if transport == "stdio":
            params = StdioServerParameters(command=sys.executable, args=[str(DEMO), "stdio"])
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            streams = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        yield session


async def _direct(
    transport: str, url: str, tool: str, args: dict[str, Any], expect: str, seconds: float
) -> list[float]:
    async with _sdk_session(transport, url) as session:
        for _ in range(20):
            await session.call_tool(tool, args)
        latencies = []
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            result = await session.call_tool(tool, args)
            latencies.append(time.perf_counter() - started)
            assert result.content[0].text == expect, result  # type: ignore[union-attr]
        return latencies


@dataclass
class Row:
    transport: str
    tool: str
    direct: list[float]
    bridge: list[float]
    queries: int  # database statements of one bridged call
    cpu_ms: float  # this process's CPU time per bridged call (all its threads)
    thread_cpu_ms: float  # the calling thread's CPU time per bridged call (the pipeline's own steps)
    over_http: list[float] = field(default_factory=list)
    http_baseline: list[float] = field(default_factory=list)


def run(*, tenant: Tenant, api_key: str, db_name: str, seconds: float, http: bool) -> list[str]:
    from django.test import override_settings

    from tests.mcp.live_servers import ALLOW_NETS, http_server

    # The demo's HTTP server listens on 127.0.0.2, which the SSRF guard lets through only when told to
    # (here and in the daphne process, which inherits the environment).
    os.environ["TOOLGATE_SSRF_ALLOW_NETS"] = ALLOW_NETS
    rows: list[Row] = []
    with override_settings(TOOLGATE_SSRF_ALLOW_NETS=ALLOW_NETS), http_server("streamable-http") as url:
        for transport in ("stdio", "streamable-http"):
            rows.extend(_measure(tenant, api_key, db_name, seconds, http, transport, url))
    lines = [
        f"MCP bridge vs the SDK directly (bench.mcp_bridge): one call at a time, {seconds:g} s each, "
        "the demo server over stdio and over streamable HTTP",
        "",
        "| server | tool | direct p50 ms | bridge p50 ms | added ms | bridge vs direct | queries "
        "| CPU ms/call | caller CPU ms/call | HTTP execute p50 ms | HTTP baseline p50 ms "
        "| HTTP vs baseline |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for row in rows:
        d, b = _median_ms(row.direct), _median_ms(row.bridge)
        h = "n/a | n/a | n/a"
        if row.over_http:
            e, base = _median_ms(row.over_http), _median_ms(row.http_baseline)
            h = f"{e:.2f} | {base:.2f} | {e / base:.2f}x"
        lines.append(
            f"| {row.transport} | {row.tool} | {d:.2f} | {b:.2f} | {b - d:.2f} | {b / d:.2f}x "
            f"| {row.queries} | {row.cpu_ms:.2f} | {row.thread_cpu_ms:.2f} | {h} |"
        )
        verdict = "meets" if b / d <= GOAL_RATIO else "misses"
        verdicts.append(f"{row.transport} {row.tool}: {b / d:.2f}x ({verdict})")
    lines.append(f"\ngoal: bridge median ≤ {GOAL_RATIO}x direct — " + "; ".join(verdicts))
    for row in rows:
        if row.tool != "echo":
            continue
        added = _median_ms(row.bridge) - _median_ms(row.direct)
        verdict = "meets" if added <= GOAL_ADDED_MS else "misses"
        text = (
            f"goal ({row.transport} echo): ≤ {GOAL_ADDED_MS:g} ms added in-process — "
            f"{added:.2f} ms ({verdict}: the pipeline's own CPU {row.thread_cpu_ms:.2f} ms in the calling "
            f"thread, the rest waiting: the record's commit, the hand-overs to and from the MCP manager's "
            "thread, wake-ups)"
        )
        if row.over_http:
            ratio = _median_ms(row.over_http) / _median_ms(row.http_baseline)
            verdict = "meets" if ratio <= GOAL_HTTP_RATIO else "misses"
            text += f"; HTTP ≤ {GOAL_HTTP_RATIO:g}x the authenticated baseline — {ratio:.2f}x ({verdict})"
        lines.append(text)
    return lines


def _cpu_per_call(call: Callable[[], None], calls: int = 300) -> tuple[float, float]:
    """Milliseconds of CPU time per call: this process's (every thread: the manager's loop and the SDK's
    client too), and the calling thread's alone (the pipeline's own steps, without the MCP client)."""
    started, started_thread = time.process_time(), time.thread_time()
    for _ in range(calls):
        call()
    return (
        (time.process_time() - started) * 1000 / calls,
        (time.thread_time() - started_thread) * 1000 / calls,
    )


def _queries(call: Callable[[], None]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured.captured_queries)


def _measure(
    tenant: Tenant, api_key: str, db_name: str, seconds: float, http: bool, transport: str, url: str
) -> list[Row]:
    import httpx

    from apps.mcp_grants import client, services
    from apps.runtime import pipeline
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent
    from apps.toolkit import gateway
    from bench.http_execute import start_daphne, stop_daphne
    from bench.urls import AUTHED_BASELINE_PATH
    from tests.mcp.live_servers import stdio_fields

    system = Actor.system(tenant)
    agent = Agent.objects.for_tenant(tenant).get(key=AGENT_KEY)
    name = "bench-stdio" if transport == "stdio" else "bench-http"
    fields = stdio_fields() if transport == "stdio" else {"transport": transport, "url": url}
    server = services.server_create(actor=system, name=name, **fields)
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    tenant.refresh_from_db()
    actor = Actor.system(tenant)
    prefix = name.replace("-", "_")

    daphne = start_daphne(db_name) if http else None
    rows = []
    try:
        for tool, args, expect in TOOLS:
            registered = f"mcp_{prefix}__{tool}"
            direct = asyncio.run(_direct(transport, url, tool, args, expect, seconds))

            def bridged(name: str = registered, args: dict[str, Any] = args, expect: str = expect) -> None:
                request = gateway.CallRequest(agent=agent, tool=name, args=args)
                outcome = pipeline.execute(actor=actor, request=request)
                assert outcome.result.for_llm == expect, outcome.result.for_llm

            bridge = _timed(bridged, seconds)
            row = Row(transport, tool, direct, bridge, _queries(bridged), *_cpu_per_call(bridged))
            if daphne is not None:
                with httpx.Client(base_url=daphne[1], headers={"Authorization": f"Bearer {api_key}"}) as web:
                    body = {"agent": AGENT_KEY, "tool": registered, "args": args}

                    def posted(body: dict[str, Any] = body, expect: str = expect) -> None:
                        response = web.post("/api/v1/runtime/execute", json=body, timeout=30)
                        assert response.json()["for_llm"] == expect, response.text

                    def baseline(body: dict[str, Any] = body) -> None:
                        response = web.post(AUTHED_BASELINE_PATH, json=body, timeout=30)
                        assert response.status_code == 200, response.text

                    row.http_baseline = _timed(baseline, seconds)
                    row.over_http = _timed(posted, seconds)
            rows.append(row)
    finally:
        if daphne is not None:
            stop_daphne(daphne[0])
        mgr = client.manager()
        mgr.run(mgr.close_all(), 30)
    return rows
