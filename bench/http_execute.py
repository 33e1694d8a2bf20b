"""``POST /api/v1/runtime/execute`` of ``datetime`` and ``GET /api/v1/agents/<key>/tools`` over a real
daphne, 16 clients at once, against an authenticated DRF endpoint that returns the same JSON
(``bench.urls.AuthedView``), in the same run.

Unlike the in-process table this includes everything a real client pays: HTTP parsing in daphne, the
thread hop of a sync view, a database connection per request (``DATABASE_CONN_MAX_AGE=0``), and for
execute the pipeline itself: agent lookup, runtime settings, the tool, scrubbing, the ``ToolCall`` row
and the live event. Client and server share the machine's cores, so absolute figures understate a real
server; the ratio to the baseline measured the same way is the figure to watch (goal: median ≤ 1.5x).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

CLIENTS = 16
GOAL_RATIO = 1.5
BASE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HttpResult:
    label: str
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_daphne(db_name: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "TOOLGATE_DB_NAME": db_name,
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        cwd=BASE_DIR,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("daphne exited during start-up")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2):  # noqa: S310 (loopback)
                return process, base
        except OSError:
            time.sleep(0.2)
    stop_daphne(process)
    raise RuntimeError("daphne did not start within 60 s")


def stop_daphne(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def _load(
    base: str,
    path: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    seconds: float,
    check: str,
) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=30) as client:

        async def send() -> httpx.Response:  # a POST of ``body``, or a GET when there is none
            return await (client.get(path) if body is None else client.post(path, json=body))

        for _ in range(20):  # warm up connections, the thread pool and the server's caches
            await send()
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await send()
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200 or check not in response.text:
                    errors += 1
                latencies.append(elapsed)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        return latencies, errors, time.perf_counter() - began


def measure(
    label: str,
    base: str,
    path: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    seconds: float,
    check: str,
) -> HttpResult:
    latencies, errors, took = asyncio.run(_load(base, path, body, headers, seconds, check))
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return HttpResult(label, len(latencies), took, statistics.median(latencies), p99, errors)


def run(*, db_name: str, api_key: str, agent_key: str, seconds: float) -> str:
    """Measure the baseline, execute and the tools listing over one daphne; the Markdown table."""
    from bench.urls import AUTHED_BASELINE_PATH

    process, base = start_daphne(db_name)
    try:
        headers = {"Authorization": f"Bearer {api_key}"}
        baseline = measure(
            "baseline: authenticated DRF endpoint, same JSON",
            base,
            AUTHED_BASELINE_PATH,
            {"agent": agent_key, "tool": "datetime", "args": {}},
            headers,
            seconds,
            "for_llm",
        )
        execute = measure(
            "POST /api/v1/runtime/execute (datetime)",
            base,
            "/api/v1/runtime/execute",
            {"agent": agent_key, "tool": "datetime", "args": {"timezone": "UTC"}},
            headers,
            seconds,
            '"is_error":false',
        )
        listing = measure(
            "GET /api/v1/agents/<key>/tools (openai)",
            base,
            f"/api/v1/agents/{agent_key}/tools",
            None,
            headers,
            seconds,
            '"datetime"',
        )
    finally:
        stop_daphne(process)
    lines = [
        f"{CLIENTS} concurrent clients, {seconds:g} s each, one daphne process:",
        "",
        "| endpoint | requests | req/s | p50 ms | p99 ms | errors | p50 vs baseline |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in (baseline, execute, listing):
        ratio_text = f"{result.p50_ms / baseline.p50_ms:.2f}x"
        lines.append(
            f"| {result.label} | {result.requests} | {result.rps:,.0f} | {result.p50_ms:.1f} "
            f"| {result.p99_ms:.1f} | {result.errors} | {ratio_text} |"
        )
    ratio = execute.p50_ms / baseline.p50_ms
    verdict = "meets" if ratio <= GOAL_RATIO else "misses"
    lines.append(f"\nexecute median is {ratio:.2f}x the baseline: {verdict} the goal of {GOAL_RATIO}x")
    return "\n".join(lines)
