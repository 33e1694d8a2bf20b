"""``python -m bench.topology``: execute through HAProxy with one node against two, in one run, on the
production topology of the tests (``tests/topology/harness.py``: standalone PostgreSQL, PgBouncer in
transaction mode, Redis, HAProxy, two ``make run`` supervisor nodes with their own web workers and
django-q2 clusters).

One node: every request carries ``X-Toolgate-Node: node1``, which HAProxy honours. Two nodes: round robin.
On one machine both nodes share its cores (and PostgreSQL, Redis and the client run there too), so the
ratio says what the balancing costs and what spare cores give; on separate machines each node brings
its own cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from bench.web_workers import CONNECTIONS, wrk_run, wrk_script  # noqa: E402
from tests.topology.harness import running  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topology", description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed run per case (default 10)")
    parser.add_argument("--web-workers", type=int, default=1, help="web workers per node (default 1)")
    args = parser.parse_args()
    started = time.monotonic()
    with running(web_workers=args.web_workers) as topology:
        prepared = time.monotonic() - started
        key = topology.owner_key("bench")
        import httpx

        with httpx.Client(
            base_url=topology.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as web:
            assert web.post("/api/v1/agents/", json={"key": "bot", "name": "Bot"}).status_code == 201
            check = web.post("/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime", "args": {}})
            assert check.json()["is_error"] is False, check.text
        body = {"agent": "bot", "tool": "datetime", "args": {"timezone": "UTC"}}
        path = "/api/v1/runtime/execute"
        one = wrk_run(topology.url, wrk_script(path, body, key, {"X-Toolgate-Node": "node1"}), args.seconds)
        two = wrk_run(topology.url, wrk_script(path, body, key), args.seconds)
    ratio = two.rps / one.rps if one.rps else 0.0
    print(
        f"Toolgate topology bench — {platform.node()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; topology started in {prepared:.0f}s; "
        f"wrk, one thread, {CONNECTIONS} connections, {args.seconds:g}s "
        f"per case, {args.web_workers} web worker(s) per node\n"
    )
    print("| case | req/s | p50 ms | p99 ms | errors |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, result in (("execute, one node (pinned)", one), ("execute, two nodes (round robin)", two)):
        print(
            f"| {label} | {result.rps:,.0f} | {result.p50_ms:.1f} | {result.p99_ms:.1f} | {result.errors} |"
        )
    print(f"\ntwo nodes give {ratio:.2f}x one node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
