"""Throughput with one web worker against N (``TOOLGATE_WEB_WORKERS``), in one run: ``POST
/api/v1/runtime/execute`` of ``datetime`` and the authenticated DRF baseline (``bench.urls.AuthedView``),
each served by daphne processes listening on one address (a ``SO_REUSEPORT`` socket each) exactly as
``make run`` starts them (``config.supervisor``).

The load comes from ``wrk`` (Debian's ``wrk``), a C client with one thread, so the client takes as little
of the machine's cores as it can: on a small machine client, server and PostgreSQL share the cores, and
the ratio N : 1 is the figure to watch (goal: at least 1.7x with 2 workers on 2 cores).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from config.supervisor import listen, web_workers

BASE_DIR = Path(__file__).resolve().parent.parent
CONNECTIONS = 16
GOAL_RATIO = 1.7
RPS_RE = re.compile(r"^Requests/sec:\s+([0-9.]+)", re.MULTILINE)
LATENCY_RE = re.compile(r"^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$", re.MULTILINE)
NON_2XX_RE = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
SOCKET_ERRORS_RE = re.compile(r"Socket errors:.*")
UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True)
class Throughput:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


class WebSet:
    """``workers`` daphne processes, each on its own inherited listening socket of one address
    (``SO_REUSEPORT``, ``config.supervisor``'s way)."""

    def __init__(self, *, db_name: str, workers: int) -> None:
        listeners = listen("127.0.0.1", 0, workers)
        self.base = f"http://127.0.0.1:{listeners[0].getsockname()[1]}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "TOOLGATE_DB_NAME": db_name,
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        # Toolgate's own web processes (as config.supervisor starts them), not a tenant's: no jail.
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "--fd", str(listener.fileno()), "config.asgi:application"],
                cwd=BASE_DIR,
                env=env,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for listener in listeners
        ]
        for listener in set(listeners):
            listener.close()
        deadline = time.monotonic() + 60
        while True:
            if any(p.poll() is not None for p in self.processes):
                self.stop()
                raise RuntimeError("a web worker exited during start-up")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=2):  # noqa: S310 (loopback)
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the web workers did not start within 60 s") from None
                time.sleep(0.2)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def wrk_script(
    path: str, body: Mapping[str, object], api_key: str, headers: Mapping[str, str] | None = None
) -> str:
    """A wrk script that POSTs ``body`` as JSON to ``path`` with the key (and ``headers``)."""
    extra = [
        f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}" for name, value in (headers or {}).items()
    ]
    return "\n".join(
        [
            *extra,
            'wrk.method = "POST"',
            f"wrk.path = {json.dumps(path)}",
            f"wrk.body = {json.dumps(json.dumps(body))}",
            'wrk.headers["Content-Type"] = "application/json"',
            f'wrk.headers["Authorization"] = {json.dumps("Bearer " + api_key)}',
        ]
    )


def wrk_run(base: str, script: str, seconds: float) -> Throughput:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        # A short warm-up (connections, thread pools, caches), then the measured run.
        warm = ["wrk", "-t1", f"-c{CONNECTIONS}", "-d2s", "-s", handle.name, base]
        subprocess.run(warm, check=True, capture_output=True, timeout=60)
        command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "--latency", "-s", handle.name, base]
        out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=seconds + 60).stdout
    finally:
        os.unlink(handle.name)
    rps = RPS_RE.search(out)
    if rps is None:
        raise RuntimeError(f"wrk printed no rate:\n{out}")
    latency = {int(m[1]): float(m[2]) * UNIT_MS[m[3]] for m in LATENCY_RE.finditer(out)}
    non_2xx = NON_2XX_RE.search(out)
    socket_errors = SOCKET_ERRORS_RE.search(out)
    errors = int(non_2xx[1]) if non_2xx else 0
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors[0]))
    return Throughput(float(rps[1]), latency.get(50, 0.0), latency.get(99, 0.0), errors)


def _check(base: str, path: str, body: Mapping[str, object], api_key: str, expect: str) -> None:
    request = urllib.request.Request(  # noqa: S310 (loopback)
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
        text = response.read().decode()
    if expect not in text:
        raise RuntimeError(f"{path} answered {text[:300]!r}")


def run(*, db_name: str, api_key: str, agent_key: str, seconds: float, workers: int | None = None) -> str:
    """Measure the baseline and execute with 1 and with ``workers`` web workers; the Markdown table."""
    from bench.urls import AUTHED_BASELINE_PATH

    if shutil.which("wrk") is None:
        raise RuntimeError("bench.web_workers needs wrk (Debian: apt-get install wrk)")
    many = workers or max(2, web_workers())
    cases = [
        (
            "baseline: authenticated DRF endpoint",
            AUTHED_BASELINE_PATH,
            {"agent": agent_key, "tool": "datetime", "args": {}},
        ),
        (
            "POST /api/v1/runtime/execute (datetime)",
            "/api/v1/runtime/execute",
            {"agent": agent_key, "tool": "datetime", "args": {"timezone": "UTC"}},
        ),
    ]
    results: dict[tuple[str, int], Throughput] = {}
    for count in (1, many):
        web = WebSet(db_name=db_name, workers=count)
        try:
            for label, path, body in cases:
                _check(web.base, path, body, api_key, "for_llm")
                results[(label, count)] = wrk_run(web.base, wrk_script(path, body, api_key), seconds)
        finally:
            web.stop()
    lines = [
        f"wrk, one thread, {CONNECTIONS} connections, {seconds:g} s per case; {os.cpu_count()} cores; "
        f"1 web worker against {many}:",
        "",
        f"| endpoint | req/s, 1 worker | req/s, {many} workers | ratio | p50 ms (1 / {many}) "
        f"| p99 ms (1 / {many}) | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for label, _path, _body in cases:
        one, more = results[(label, 1)], results[(label, many)]
        ratio = more.rps / one.rps if one.rps else 0.0
        lines.append(
            f"| {label} | {one.rps:,.0f} | {more.rps:,.0f} | {ratio:.2f}x "
            f"| {one.p50_ms:.1f} / {more.p50_ms:.1f} | {one.p99_ms:.1f} / {more.p99_ms:.1f} "
            f"| {one.errors + more.errors} |"
        )
        if label.startswith("POST"):
            verdict = "meets" if ratio >= GOAL_RATIO else "misses"
            verdicts.append(
                f"execute with {many} workers is {ratio:.2f}x one worker: {verdict} the goal of {GOAL_RATIO}x"
            )
    return "\n".join([*lines, "", *verdicts])
