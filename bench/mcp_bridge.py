"""A tool call through Toolgate's MCP bridge against the same call made directly with the SDK.

The demo MCP server of the tests (``tests/mcp/servers/demo.py``, stdio) is registered for the bench
tenant and granted to one agent. Measured one call at a time (latency, not throughput), each for the
same number of seconds:

* direct: the SDK's own client (``stdio_client`` + ``ClientSession``) on one reused session: the floor;
* bridge: ``apps.runtime.pipeline.execute`` in this process: policy, call-time grant check, schema
  check, rate limit, the call over the manager's reused connection, result mapping, scrubbing, the
  ToolCall row and its live event;
* HTTP: ``POST /api/v1/runtime/execute`` on a daphne process (what an agent loop pays), left out with
  ``--skip-http``.

Two tools: ``echo`` (no work: the pure overhead) and ``sleep`` 10 ms (a tool that does some work, as
real ones do). The goal is a median through the bridge of at most 1.3x the direct call.

Part of ``python -m bench``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

GOAL_RATIO = 1.3
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


async def _direct(tool: str, args: dict[str, Any], expect: str, seconds: float) -> list[float]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from tests.mcp.live_servers import DEMO

    params = StdioServerParameters(command=sys.executable, args=[str(DEMO), "stdio"])
    async with stdio_client(params) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
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


def run(*, tenant: Tenant, api_key: str, db_name: str, seconds: float, http: bool) -> list[str]:
    import httpx

    from apps.mcp_grants import client, services
    from apps.runtime import pipeline
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent
    from bench.http_execute import start_daphne, stop_daphne
    from tests.mcp.live_servers import stdio_fields

    system = Actor.system(tenant)
    agent = Agent.objects.for_tenant(tenant).get(key=AGENT_KEY)
    server = services.server_create(actor=system, name="benchdemo", **stdio_fields())  # type: ignore[arg-type]
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    tenant.refresh_from_db()
    actor = Actor.system(tenant)

    daphne = start_daphne(db_name) if http else None
    rows = []
    try:
        for tool, args, expect in TOOLS:
            name = f"mcp_benchdemo__{tool}"
            direct = asyncio.run(_direct(tool, args, expect, seconds))

            def bridged(name: str = name, args: dict[str, Any] = args, expect: str = expect) -> None:
                request = pipeline.CallRequest(agent=agent, tool=name, args=args)
                outcome = pipeline.execute(actor=actor, request=request)
                assert outcome.result.for_llm == expect, outcome.result.for_llm

            bridge = _timed(bridged, seconds)
            over_http: list[float] = []
            if daphne is not None:
                with httpx.Client(base_url=daphne[1], headers={"Authorization": f"Bearer {api_key}"}) as web:

                    def posted(name: str = name, args: dict[str, Any] = args, expect: str = expect) -> None:
                        body = {"agent": AGENT_KEY, "tool": name, "args": args}
                        response = web.post("/api/v1/runtime/execute", json=body, timeout=30)
                        assert response.json()["for_llm"] == expect, response.text

                    over_http = _timed(posted, seconds)
            rows.append((tool, direct, bridge, over_http))
    finally:
        if daphne is not None:
            stop_daphne(daphne[0])
        mgr = client.manager()
        mgr.run(mgr.close_all(), 30)

    lines = [
        f"MCP bridge vs the SDK directly (bench.mcp_bridge): one call at a time, {seconds:g} s each, "
        "stdio demo server",
        "",
        "| tool | direct p50 ms | bridge p50 ms | bridge vs direct | HTTP execute p50 ms | HTTP vs direct |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for tool, direct, bridge, over_http in rows:
        d, b = _median_ms(direct), _median_ms(bridge)
        h = f"{_median_ms(over_http):.2f} | {_median_ms(over_http) / d:.2f}x" if over_http else "n/a | n/a"
        lines.append(f"| {tool} | {d:.2f} | {b:.2f} | {b / d:.2f}x | {h} |")
        verdicts.append(f"{tool}: bridge {b / d:.2f}x ({'meets' if b / d <= GOAL_RATIO else 'misses'})")
    lines.append(f"\ngoal: bridge median ≤ {GOAL_RATIO}x direct — " + "; ".join(verdicts))
    return lines
