"""Noisy neighbour: tenant B's normal mix alone, then with tenant A driving tool calls far above its
quota at the same time, over one real daphne, in one run (``python -m bench --only-noisy-neighbour``):
first straight to daphne, then through HAProxy with the deployed frontend's quota gate
(``bench.load_balancer``), as Toolgate is deployed.

B's mix: 4 clients, each looping over ``POST /runtime/execute`` (datetime), ``GET /agents/<key>/tools``
and ``GET /me/`` with a 20 ms pause between requests (a busy agent loop, not a flood). A: ``wrk`` (a C
client in a process of its own, so that A's flood does not slow B's client), 16 connections paced at
1,000 requests a second in all (500 times A's request quota), ``POST /runtime/execute`` only, with
``tool_calls_per_minute`` at 60 and ``api_requests_per_minute`` at 120. Before the measured phase A
floods until its quota is spent: a per-minute quota first allows its minute's worth at once, and the
steady state of a tenant far above its quota is refusals. Reported: B's p50 and p95 alone and with A,
their ratios (goal: p95 within 1.5x), and A's outcome: calls allowed, refused cleanly (429
``quota_exceeded``, or an error result naming the quota) and server errors (goal: 0).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from apps.accounts import services as accounts
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from bench import http_execute
from bench.load_balancer import load_balancer
from bench.web_workers import wrk_script

QUIET_CLIENTS = 4
NOISY_CLIENTS = 16
# A's pace: 1,000 requests a second is 500 times its request quota (120 a minute). Paced rather than
# unbounded, so that the flood's generator (wrk, on this same 2-core machine) does not itself take the
# CPU B needs: an attacker's load generator runs on its own machines.
NOISY_RATE = 1000
PAUSE_SECONDS = 0.02
GOAL_P95_RATIO = 1.5
NOISY_QUOTAS = {"tool_calls_per_minute": 60, "api_requests_per_minute": 120}


@dataclass
class Mix:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")


@dataclass
class Flood:
    allowed: int = 0
    refused: int = 0
    server_errors: int = 0
    other: int = 0


def seed() -> tuple[str, str]:
    """Two tenants with an agent and a member key each; A with a tool-call quota it will far exceed."""
    keys = []
    for slug in ("noisy", "quiet"):
        tenant = accounts.tenant_create(slug=slug, name=slug.title())
        system = Actor.system(tenant)
        accounts.agent_create(actor=system, key="bot", name="Bot")
        _, raw = accounts.api_key_create(actor=system, name="bench", role=Role.MEMBER)
        keys.append(raw)
    Tenant.objects.filter(slug="noisy").update(quotas=NOISY_QUOTAS)
    # B's mix (about 4,500 requests a minute) is not what is tested: its own rate quotas are off.
    Tenant.objects.filter(slug="quiet").update(
        quotas={"tool_calls_per_minute": 0, "api_requests_per_minute": 0}
    )
    return keys[0], keys[1]


async def _quiet(base: str, key: str, until: float, mix: Mix) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    requests: list[tuple[str, str, dict[str, Any] | None]] = [
        (
            "POST",
            "/api/v1/runtime/execute",
            {"agent": "bot", "tool": "datetime", "args": {"timezone": "UTC"}},
        ),
        ("GET", "/api/v1/agents/bot/tools", None),
        ("GET", "/api/v1/me/", None),
    ]
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        step = 0
        while time.perf_counter() < until:
            method, path, body = requests[step % len(requests)]
            step += 1
            started = time.perf_counter()
            response = await client.request(method, path, json=body)
            mix.latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200 or (body is not None and '"is_error":false' not in response.text):
                mix.errors += 1
            await asyncio.sleep(PAUSE_SECONDS)


# Counts A's answers by kind in wrk's threads and prints them once at the end.
WRK_COUNTER = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) allowed = 0; refused = 0; server_errors = 0; other = 0 end
function response(status, headers, body)
  if status >= 500 then server_errors = server_errors + 1
  elseif status == 429 and body:find("quota_exceeded", 1, true) then refused = refused + 1
  elseif status == 200 and body:find("tool_calls_per_minute", 1, true) then refused = refused + 1
  elseif status == 200 and body:find('"is_error":false', 1, true) then allowed = allowed + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local a, r, s, o = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("allowed"); r = r + t:get("refused"); s = s + t:get("server_errors"); o = o + t:get("other")
  end
  io.write(string.format("COUNTS %d %d %d %d\\n", a, r, s, o))
end
"""


def _flood_command(base: str, key: str, seconds: float, script: str) -> list[str]:
    return ["wrk", "-t1", f"-c{NOISY_CLIENTS}", f"-d{seconds:g}s", "-s", script, base]


def _flood_script(key: str) -> str:
    lua = wrk_script("/api/v1/runtime/execute", {"agent": "bot", "tool": "datetime", "args": {}}, key)
    pace = f"function delay() return {NOISY_CLIENTS * 1000 // NOISY_RATE} end"  # ms per connection
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(lua + "\n" + WRK_COUNTER + "\n" + pace)
    return handle.name


def _counts(output: str) -> Flood:
    found = re.search(r"COUNTS (\d+) (\d+) (\d+) (\d+)", output)
    if found is None:
        raise RuntimeError(f"wrk printed no counts:\n{output}")
    allowed, refused, server_errors, other = (int(n) for n in found.groups())
    return Flood(allowed=allowed, refused=refused, server_errors=server_errors, other=other)


async def _spend(base: str, key: str) -> Flood:
    """A floods until its quota refuses it 50 times in a row (at most 60 s)."""
    flood, streak, until = Flood(), 0, time.perf_counter() + 60
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        while streak < 50 and time.perf_counter() < until:
            response = await client.post("/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime"})
            refused = response.status_code == 429 or "tool_calls_per_minute" in response.text
            streak = streak + 1 if refused else 0
            flood.refused += refused
            flood.allowed += response.status_code == 200 and '"is_error":false' in response.text
    return flood


async def _phase(base: str, quiet_key: str, seconds: float) -> Mix:
    mix = Mix()
    until = time.perf_counter() + seconds
    await asyncio.gather(*(_quiet(base, quiet_key, until, mix) for _ in range(QUIET_CLIENTS)))
    return mix


def _shared_phase(base: str, quiet_key: str, noisy_key: str, seconds: float) -> tuple[Mix, Flood]:
    script = _flood_script(noisy_key)
    try:
        # wrk runs a little longer than B's phase, so that A floods through all of it.
        flood = subprocess.Popen(
            _flood_command(base, noisy_key, seconds + 1, script), stdout=subprocess.PIPE, text=True
        )
        time.sleep(0.5)
        mix = asyncio.run(_phase(base, quiet_key, seconds))
        output, _ = flood.communicate(timeout=seconds + 60)
    finally:
        os.unlink(script)
    return mix, _counts(output)


@dataclass
class Measured:
    way: str
    alone: Mix
    shared: Mix
    flood: Flood
    spent: Flood


ROUNDS = 3  # alone and shared phases alternate, so that the machine's drift falls on both alike


def _measure(way: str, base: str, noisy_key: str, quiet_key: str, seconds: float) -> Measured:
    """B alone and B with A, ``ROUNDS`` times each, alternating, over ``seconds`` in all per side."""
    asyncio.run(_phase(base, quiet_key, 2.0))  # warm up connections, caches, the thread pool
    spent = asyncio.run(_spend(base, noisy_key))
    alone, shared, flood = Mix(), Mix(), Flood()
    for _ in range(ROUNDS):
        one = asyncio.run(_phase(base, quiet_key, seconds / ROUNDS))
        alone.latencies += one.latencies
        alone.errors += one.errors
        mix, part = _shared_phase(base, quiet_key, noisy_key, seconds / ROUNDS)
        shared.latencies += mix.latencies
        shared.errors += mix.errors
        for name in ("allowed", "refused", "server_errors", "other"):
            setattr(flood, name, getattr(flood, name) + getattr(part, name))
    return Measured(way=way, alone=alone, shared=shared, flood=flood, spent=spent)


def _report(measured: Measured, seconds: float) -> list[str]:
    alone, shared, flood = measured.alone, measured.shared, measured.flood
    p50_ratio = shared.percentile(0.5) / alone.percentile(0.5)
    p95_ratio = shared.percentile(0.95) / alone.percentile(0.95)
    verdict = "meets" if p95_ratio <= GOAL_P95_RATIO and flood.server_errors == 0 else "misses"
    sent = flood.allowed + flood.refused + flood.other + flood.server_errors
    return [
        f"**{measured.way}** (A's quota spent first: {measured.spent.allowed} allowed, "
        f"{measured.spent.refused} refused)",
        "",
        "| tenant B | requests | p50 ms | p95 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| alone | {len(alone.latencies)} | {statistics.median(alone.latencies):.1f} "
        f"| {alone.percentile(0.95):.1f} | {alone.errors} |",
        f"| with A flooding | {len(shared.latencies)} | {statistics.median(shared.latencies):.1f} "
        f"| {shared.percentile(0.95):.1f} | {shared.errors} |",
        "",
        f"B with A / B alone: p50 {p50_ratio:.2f}x, p95 {p95_ratio:.2f}x (goal p95 <= {GOAL_P95_RATIO}x). "
        f"A: {sent} sent ({sent / (seconds + ROUNDS):,.0f}/s): {flood.allowed} allowed, "
        f"{flood.refused} refused with quota_exceeded, {flood.server_errors} server errors, "
        f"{flood.other} other answers. "
        f"Verdict: {verdict} the goal.",
        "",
    ]


def run(*, db_name: str, seconds: float) -> list[str]:
    if shutil.which("wrk") is None:
        raise RuntimeError("bench.noisy_neighbour needs wrk (Debian: apt-get install wrk)")
    noisy_key, quiet_key = seed()
    process, base = http_execute.start_daphne(db_name)
    try:
        direct = _measure("Straight to daphne", base, noisy_key, quiet_key, seconds)
        with load_balancer([base.removeprefix("http://")]) as balanced:
            gated = _measure(
                "Through HAProxy with the deployed quota gate", balanced, noisy_key, quiet_key, seconds
            )
    finally:
        http_execute.stop_daphne(process)
    header = (
        f"Noisy neighbour, one daphne process, B alone and B with A {seconds:g} s each, in {ROUNDS} "
        f"alternating rounds: tenant B {QUIET_CLIENTS} clients "
        f"(execute / tools / me, {PAUSE_SECONDS * 1000:g} ms pause); tenant A {NOISY_CLIENTS} connections "
        f"of execute paced at {NOISY_RATE:,} requests a second at most (wrk), quotas {NOISY_QUOTAS}, spent "
        "before each measured phase."
    )
    return [header, "", *_report(direct, seconds), *_report(gated, seconds)]
