"""``python -m bench``: create the throwaway database, seed it, measure, print a table, drop it.

See the package docstring for why it measures in-process, and ``bench.db`` for the database.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from bench.db import BENCH_DB

# Before Django reads its settings: point every connection (and the channel layer) at the bench
# database, whatever the caller's environment says, so the developer's ``toolgate`` stays untouched.
os.environ["TOOLGATE_DB_NAME"] = BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# One log line per request at INFO would measure the console, not the code.
os.environ.setdefault("LOG_LEVEL", "WARNING")
# The tests' MCP servers the bench registers run in the jail like any stdio server: their directory is
# shown read-only there, as an operator lists a server's installation (and as the tests do).
os.environ.setdefault(
    "TOOLGATE_JAIL_RO_PATHS", str(Path(__file__).resolve().parent.parent / "tests" / "mcp" / "servers")
)

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from bench import (  # noqa: E402
    data,
    db,
    http_execute,
    mcp_bridge,
    mcp_endpoint,
    measure,
    memory_search,
    noisy_neighbour,
    overview,
    policy,
    sandbox,
    scrub,
    teams,
    web_workers,
)
from bench.urls import BASELINE_PATH  # noqa: E402
from config import embedded_db  # noqa: E402


def _endpoints(seeded: data.BenchData) -> list[measure.Endpoint]:
    auth = {"Authorization": f"Bearer {seeded.api_key}"}

    def me_is_bench(response: object) -> None:
        body = response.json()  # type: ignore[attr-defined]
        assert body["tenant"]["slug"] == "bench", body

    def fifty_agents(response: object) -> None:
        body = response.json()  # type: ignore[attr-defined]
        assert body["count"] == data.AGENTS, body.get("count")
        assert len(body["results"]) == data.AGENTS

    def an_audit_page(response: object) -> None:
        body = response.json()  # type: ignore[attr-defined]
        assert len(body["results"]) == 50, len(body["results"])
        assert body["next"], "1000 events must span several pages"

    return [
        measure.Endpoint("baseline: bare DRF APIView", BASELINE_PATH),
        measure.Endpoint("GET /healthz (plain Django view)", "/healthz"),
        measure.Endpoint("GET /api/v1/me/ (API key)", "/api/v1/me/", auth, me_is_bench),
        measure.Endpoint(
            f"GET /api/v1/agents/ ({data.AGENTS} agents)", "/api/v1/agents/", auth, fifty_agents
        ),
        measure.Endpoint(
            f"GET /api/v1/audit/events/ ({data.AUDIT_EVENTS} events, page of 50)",
            "/api/v1/audit/events/",
            auth,
            an_audit_page,
        ),
    ]


def _table(results: list[measure.Result]) -> str:
    baseline = results[0]
    lines = [
        "| endpoint | req/s | p50 ms | p95 ms | queries/req | vs baseline |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        # Ratio of mean latencies (= inverse ratio of requests/s): how many baseline requests one costs.
        ratio = r.mean_ms / baseline.mean_ms
        lines.append(
            f"| {r.label} | {r.rps:,.0f} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | {r.queries_text()} "
            f"| {ratio:.1f}x |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="timed run per endpoint (default 4)")
    parser.add_argument("--show-queries", action="store_true", help="print the SQL of one request each")
    parser.add_argument("--skip-http", action="store_true", help="skip the execute-over-daphne measurement")
    parser.add_argument(
        "--skip-sandbox", action="store_true", help="skip the exec sandbox (Docker) measurement"
    )
    parser.add_argument(
        "--only-web-workers",
        action="store_true",
        help="measure only execute and the baseline with 1 and with N web workers (bench.web_workers)",
    )
    parser.add_argument(
        "--only-mcp-bridge",
        action="store_true",
        help="measure only the MCP bridge against the SDK directly (bench.mcp_bridge)",
    )
    parser.add_argument(
        "--only-overview",
        action="store_true",
        help="measure only the Overview's endpoints and page with 100,000 tool calls (bench.overview)",
    )
    parser.add_argument(
        "--only-noisy-neighbour",
        action="store_true",
        help="measure only tenant B's latency alone and with tenant A flooding past its quota",
    )
    parser.add_argument(
        "--web-workers", type=int, default=None, help="N for bench.web_workers (default: cores)"
    )
    args = parser.parse_args()
    if args.only_web_workers or args.only_mcp_bridge or args.only_overview or args.only_noisy_neighbour:
        args.skip_sandbox = True
    # The Docker engine is checked (and the busybox image built) before minutes are spent on the rest.
    try:
        sandboxed = None if args.skip_sandbox else sandbox.prepare()
    except sandbox.EngineUnavailable as error:
        parser.exit(1, f"python -m bench: {error}\n")

    settings_dict = connections["default"].settings_dict
    started = time.monotonic()
    try:
        db.recreate(settings_dict)
        call_command("migrate", verbosity=0, interactive=False)
        call_command("createcachetable", verbosity=0)
        seeded = data.seed()
        prepared = time.monotonic() - started

        if args.only_web_workers:
            print(
                web_workers.run(
                    db_name=BENCH_DB,
                    api_key=seeded.api_key,
                    agent_key="agent-00",
                    seconds=args.seconds,
                    workers=args.web_workers,
                )
            )
            return 0
        if args.only_noisy_neighbour:
            print("\n".join(noisy_neighbour.run(db_name=BENCH_DB, seconds=args.seconds)))
            return 0
        if args.only_overview:
            print("\n".join(overview.run(tenant=seeded.tenant, api_key=seeded.api_key, seconds=args.seconds)))
            return 0
        if args.only_mcp_bridge:
            print(
                "\n".join(
                    mcp_bridge.run(
                        tenant=seeded.tenant,
                        api_key=seeded.api_key,
                        db_name=BENCH_DB,
                        seconds=args.seconds,
                        http=not args.skip_http,
                    )
                )
            )
            return 0
        results: list[measure.Result] = []
        # "testserver" is the test client's Host header; the bench URLconf adds the baseline route.
        with override_settings(ROOT_URLCONF="bench.urls", ALLOWED_HOSTS=["testserver"]):
            client = Client()
            for endpoint in _endpoints(seeded):
                results.append(measure.run(client, endpoint, seconds=args.seconds))
        connect = measure.connect_ms()
        http_table = (
            None
            if args.skip_http
            else http_execute.run(
                db_name=BENCH_DB, api_key=seeded.api_key, agent_key="agent-00", seconds=args.seconds
            )
        )
        bridge_lines = mcp_bridge.run(
            tenant=seeded.tenant,
            api_key=seeded.api_key,
            db_name=BENCH_DB,
            seconds=args.seconds,
            http=not args.skip_http,
        )
        workers_table = (
            None
            if args.skip_http
            else web_workers.run(
                db_name=BENCH_DB,
                api_key=seeded.api_key,
                agent_key="agent-00",
                seconds=args.seconds,
                workers=args.web_workers,
            )
        )
        mcp_table = (
            None
            if args.skip_http
            else mcp_endpoint.run(
                db_name=BENCH_DB, api_key=seeded.api_key, agent_key="agent-00", seconds=args.seconds
            )
        )
        policy_lines = policy.run(
            tenant=seeded.tenant,
            agent_key="agent-01",
            api_key=seeded.api_key,
            db_name=BENCH_DB,
            http=not args.skip_http,
        )
        team_lines = teams.run(
            tenant=seeded.tenant,
            api_key=seeded.api_key,
            db_name=BENCH_DB,
            seconds=args.seconds,
            http=not args.skip_http,
        )
        memory_lines = memory_search.run(tenant=seeded.tenant)
        overview_lines = overview.run(tenant=seeded.tenant, api_key=seeded.api_key, seconds=args.seconds)
        sandbox_lines = None if sandboxed is None else sandbox.run(tenant=seeded.tenant, prepared=sandboxed)
    finally:
        connections.close_all()
        db.drop(settings_dict)
        if settings.EMBEDDED_DATABASE and embedded_db.started_here:
            embedded_db.stop()

    where = "embedded PostgreSQL" if settings.EMBEDDED_DATABASE else "DATABASE_URL's server"
    print(
        f"Toolgate bench — in-process Django test client, database {BENCH_DB!r} on the {where} "
        f"(created, seeded and dropped by this run; setup {prepared:.1f}s)"
    )
    print(
        f"Python {platform.python_version()}, Django {django.get_version()}, {args.seconds:g}s per endpoint\n"
    )
    print(_table(results))
    print(
        f"\nGetting a database connection: {connect:.2f} ms (median; "
        f"{'from the pool' if settings.DATABASES['default']['OPTIONS'].get('pool') else 'a new one'}). "
        "Under daphne every request that touches the database pays this on top of the figures above."
    )
    if http_table is not None:
        print("\nExecute over HTTP (bench.http_execute):\n")
        print(http_table)
    if workers_table is not None:
        print("\nWeb workers (bench.web_workers):\n")
        print(workers_table)
    print("\n" + "\n".join(bridge_lines))
    if mcp_table is not None:
        print("\nThe MCP endpoint against the REST API (bench.mcp_endpoint):\n")
        print(mcp_table)
    print("\n" + "\n".join(policy_lines))
    print("\n" + "\n".join(team_lines))
    print("\n" + "\n".join(memory_lines))
    print("\n" + "\n".join(overview_lines))
    if sandbox_lines is not None:
        print("\n" + "\n".join(sandbox_lines))
    if args.show_queries:
        for r in results:
            print(f"\n{r.label}:")
            for statement in r.sample_sql:
                print(f"  {statement}")
    print("\n" + "\n".join(scrub.run()))  # no database: measured after it is dropped
    print(f"\ntotal {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
