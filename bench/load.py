"""Sustained mixed load against the processes ``make run`` starts (one daphne, one django-q2 cluster) on
the bench database: ``python -m bench.load [--seconds 300] [--clients 16] [--sockets 10]``.

The mix, drawn at random by weight for every request of ``--clients`` concurrent HTTP clients:

* execute ``datetime`` (a built-in tool) and ``echo`` of a real MCP server (the tests' demo server
  over stdio, registered and granted through the services);
* the agent's tools listing;
* the MCP endpoint's ``tools/call`` and ``tools/list`` (raw JSON-RPC);
* a task created on a team's board (a write, with its live event);
* a page of the audit log;

and ``--sockets`` websocket subscribers of the team's topic, each counting the events it receives.

It reports requests per second, p50, p95 and p99 per operation, the errors (any unexpected status or
answer, and any socket closed under load), the tool calls answered against the ``ToolCall`` rows
written (none may be lost), the task events received per socket against the tasks created, and the
resident memory of each process before and after. ``run`` is also used by the suite's short version
(``tests/live/test_load.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

from bench.mcp_endpoint import MCP_HEADERS, sse_result

BASE_DIR = Path(__file__).resolve().parent.parent
# The demo MCP server runs in the jail like any stdio server: its directory is shown read-only there, as
# an operator lists a server's installation (set before Django reads its settings).
os.environ.setdefault("TOOLGATE_JAIL_RO_PATHS", str(BASE_DIR / "tests" / "mcp" / "servers"))
AGENT = "load-agent"
MCP_SERVER = "load-demo"
# (operation, weight)
MIX = (
    ("execute datetime", 20),
    ("execute MCP echo", 15),
    ("tools listing", 10),
    ("MCP tools/call", 15),
    ("MCP tools/list", 10),
    ("team task create", 10),
    ("audit page", 20),
)
TOOL_CALLS = ("execute datetime", "execute MCP echo", "MCP tools/call")


@dataclass
class Target:
    base: str
    api_key: str
    team_id: str

    @property
    def ws_url(self) -> str:
        return self.base.replace("http://", "ws://") + "/ws/events/"


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    tasks_created: int = 0
    socket_events: list[int] = field(default_factory=list)
    socket_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tool_calls_answered(self) -> int:
        return sum(len(self.latencies[name]) for name in TOOL_CALLS)

    @property
    def error_count(self) -> int:
        return sum(len(v) for v in self.errors.values()) + len(self.socket_errors)


async def _operation(http: httpx.AsyncClient, target: Target, name: str, n: int) -> str | None:
    """Send one request of kind ``name``; None when the answer is right, else what was wrong."""
    mcp = f"/mcp/{AGENT}/"
    if name == "execute datetime":
        response = await http.post(
            "/api/v1/runtime/execute", json={"agent": AGENT, "tool": "datetime", "args": {"timezone": "UTC"}}
        )
        ok = response.status_code == 200 and response.json()["is_error"] is False
    elif name == "execute MCP echo":
        body = {
            "agent": AGENT,
            "tool": f"mcp_{MCP_SERVER.replace('-', '_')}__echo",
            "args": {"text": f"m{n}"},
        }
        response = await http.post("/api/v1/runtime/execute", json=body)
        ok = response.status_code == 200 and response.json()["for_llm"] == f"m{n}"
    elif name == "tools listing":
        response = await http.get(f"/api/v1/agents/{AGENT}/tools")
        ok = response.status_code == 200 and response.json()["count"] > 0
    elif name == "MCP tools/call":
        call = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "datetime", "arguments": {}},
        }
        response = await http.post(mcp, json=call, headers=MCP_HEADERS)
        ok = (
            response.status_code == 200 and (sse_result(response).get("result") or {}).get("isError") is False
        )
    elif name == "MCP tools/list":
        listing = {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {}}
        response = await http.post(mcp, json=listing, headers=MCP_HEADERS)
        ok = response.status_code == 200 and bool((sse_result(response).get("result") or {}).get("tools"))
    elif name == "team task create":
        response = await http.post(
            f"/api/v1/teams/{target.team_id}/tasks/", json={"subject": f"load task {n}"}
        )
        ok = response.status_code == 201
    else:
        response = await http.get("/api/v1/audit/events/")
        ok = response.status_code == 200 and "results" in response.json()
    return None if ok else f"{response.status_code} {response.text[:200]}"


async def _client(
    http: httpx.AsyncClient, target: Target, outcome: Outcome, deadline: float, seed: int
) -> None:
    rng = random.Random(seed)  # noqa: S311  (a reproducible mix, not a secret)
    names = [name for name, _ in MIX]
    weights = [weight for _, weight in MIX]
    n = 0
    while time.monotonic() < deadline:
        n += 1
        name = rng.choices(names, weights)[0]
        started = time.perf_counter()
        try:
            wrong = await _operation(http, target, name, seed * 1_000_000 + n)
        except (httpx.HTTPError, ValueError, KeyError) as error:
            wrong = repr(error)
        if wrong is None:
            outcome.latencies[name].append((time.perf_counter() - started) * 1000)
            if name == "team task create":
                outcome.tasks_created += 1
        else:
            outcome.errors[name].append(wrong)


async def _subscriber(target: Target, outcome: Outcome, stop: asyncio.Event, ready: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {target.api_key}"}
    received = 0
    try:
        async with websockets.connect(target.ws_url, additional_headers=headers, open_timeout=30) as socket:
            await socket.send(json.dumps({"type": "subscribe", "topics": [f"team:{target.team_id}"]}))
            reply = json.loads(await asyncio.wait_for(socket.recv(), 30))
            while reply.get("type") == "hello":  # the greeting comes first
                reply = json.loads(await asyncio.wait_for(socket.recv(), 30))
            if reply.get("type") != "subscribed":
                raise RuntimeError(f"not subscribed: {reply}")
            ready.set()
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    message = json.loads(await asyncio.wait_for(socket.recv(), 0.5))
                    if message.get("type") == "event" and message["event"].get("type") == "task.created":
                        received += 1
            # Events of the last tasks may still be on their way.
            with contextlib.suppress(TimeoutError):
                while True:
                    message = json.loads(await asyncio.wait_for(socket.recv(), 3))
                    if message.get("type") == "event" and message["event"].get("type") == "task.created":
                        received += 1
    except Exception as error:  # any failure of a socket under load is an error of the run
        outcome.socket_errors.append(repr(error)[:200])
    finally:
        ready.set()
    outcome.socket_events.append(received)


async def _run(target: Target, *, seconds: float, clients: int, sockets: int) -> Outcome:
    outcome = Outcome()
    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(sockets)]
    subscribers = [asyncio.create_task(_subscriber(target, outcome, stop, ready)) for ready in readies]
    await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 60)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {target.api_key}"}
    async with httpx.AsyncClient(base_url=target.base, headers=headers, limits=limits, timeout=60) as http:
        started = time.monotonic()
        deadline = started + seconds
        await asyncio.gather(*(_client(http, target, outcome, deadline, i + 1) for i in range(clients)))
        outcome.seconds = time.monotonic() - started
    stop.set()
    await asyncio.gather(*subscribers)
    return outcome


def run(target: Target, *, seconds: float, clients: int, sockets: int) -> Outcome:
    return asyncio.run(_run(target, seconds=seconds, clients=clients, sockets=sockets))


def seed(tenant: Any) -> tuple[str, str]:
    """The load's agent (granted the demo MCP server over stdio), its team, and an admin key: (key, team
    id)."""
    from apps.accounts import services as accounts
    from apps.mcp_grants import client, services
    from apps.teams import services as teams
    from apps.tenants.actors import Actor
    from apps.tenants.roles import Role
    from tests.mcp.live_servers import stdio_fields

    system = Actor.system(tenant)
    # The load measures capacity: one tenant driven as hard as the server goes, its rate quotas off.
    type(tenant).objects.filter(pk=tenant.pk).update(
        quotas={"tool_calls_per_minute": 0, "api_requests_per_minute": 0}
    )
    tenant.quotas = {"tool_calls_per_minute": 0, "api_requests_per_minute": 0}
    agent = accounts.agent_create(
        actor=system, key=AGENT, name="Load agent", settings={"sandbox": {"mode": "off"}}
    )
    lead = accounts.agent_create(actor=system, key="load-lead", name="Load lead")
    server = services.server_create(actor=system, name=MCP_SERVER, **stdio_fields())
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    team = teams.team_create(actor=system, name="Load team", lead=lead, members=[agent])
    _, raw = accounts.api_key_create(actor=system, name="load", role=Role.ADMIN)
    return raw, str(team.pk)


def tool_call_rows(tenant_id: str) -> int:
    from apps.audit.models import ToolCall

    return ToolCall.objects.dangerously_all_tenants().filter(tenant_id=tenant_id).count()


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the cluster's workers), in MiB."""
    total = 0
    pids = [pid]
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(child) for child in children]
    for each in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


def report(outcome: Outcome, *, rows: int, memory: dict[str, tuple[float, float]]) -> list[str]:
    lines = [
        "| operation | requests | req/s | p50 ms | p95 ms | p99 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, _ in MIX:
        done = outcome.latencies[name]
        median = statistics.median(done) if done else 0.0
        lines.append(
            f"| {name} | {len(done)} | {len(done) / outcome.seconds:.1f} | {median:.1f} "
            f"| {percentile(done, 0.95):.1f} | {percentile(done, 0.99):.1f} | {len(outcome.errors[name])} |"
        )
    total = sum(len(v) for v in outcome.latencies.values())
    lines.append(f"| all | {total} | {total / outcome.seconds:.1f} | | | | {outcome.error_count} |")
    lines += [
        "",
        f"tool calls answered {outcome.tool_calls_answered}, ToolCall rows written {rows}: "
        f"{outcome.tool_calls_answered - rows} lost",
        f"websocket subscribers {len(outcome.socket_events)}: task.created events received per socket "
        f"{sorted(set(outcome.socket_events))} of {outcome.tasks_created} tasks created; "
        f"socket errors {len(outcome.socket_errors)}",
        "resident memory (MiB, before -> after): "
        + ", ".join(f"{name} {before:.0f} -> {after:.0f}" for name, (before, after) in memory.items()),
    ]
    for name, wrong in outcome.errors.items():
        if wrong:
            lines.append(f"first errors of {name}: {wrong[:3]}")
    lines += [f"socket error: {error}" for error in outcome.socket_errors[:3]]
    return lines


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=BASE_DIR,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--seconds", type=float, default=300.0, help="length of the run (default 300)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients (default 16)")
    parser.add_argument("--sockets", type=int, default=10, help="websocket subscribers (default 10)")
    args = parser.parse_args()

    from bench import db
    from bench.http_execute import start_daphne, stop_daphne

    def work(tenant: Any) -> list[str]:
        raw, team_id = seed(tenant)
        env = {**os.environ, "TOOLGATE_DB_NAME": db.BENCH_DB, "LOG_LEVEL": "WARNING"}
        cluster = _start([sys.executable, "manage.py", "qcluster"], env)
        daphne, base = start_daphne(db.BENCH_DB)
        try:
            time.sleep(2)
            processes = {"daphne": daphne.pid, "qcluster": cluster.pid}
            before = {name: rss_mb(pid) for name, pid in processes.items()}
            rows_before = tool_call_rows(str(tenant.pk))
            outcome = run(
                Target(base, raw, team_id), seconds=args.seconds, clients=args.clients, sockets=args.sockets
            )
            time.sleep(1)
            rows = tool_call_rows(str(tenant.pk)) - rows_before
            memory = {name: (before[name], rss_mb(pid)) for name, pid in processes.items()}
        finally:
            stop_daphne(daphne)
            cluster.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                cluster.wait(timeout=30)
        from apps.mcp_grants import client

        manager = client.manager()
        manager.run(manager.close_all(), 30)
        head = [
            f"Load: {args.clients} HTTP clients and {args.sockets} websocket subscribers for "
            f"{outcome.seconds:.0f} s against one daphne and one django-q2 cluster ({os.cpu_count()} cores)",
            "",
        ]
        return head + report(outcome, rows=rows, memory=memory)

    return db.with_bench_tenant(work)


if __name__ == "__main__":
    from bench.db import standalone

    standalone(main)
