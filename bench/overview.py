"""The Overview's cost with 100,000 tool calls in the tenant (``python -m bench --only-overview``).

The calls are inserted in one statement (``INSERT … SELECT`` over ``generate_series``), spread evenly
over the last seven days with a mix of outcomes, tools, agents and durations, then analyzed; a second
tenant gets 20,000 calls of its own so that tenant scoping has rows to leave out. Each aggregate
endpoint (every range for the series) and the Overview page are timed through the in-process test client
against the authenticated baseline of ``bench.urls`` (an API key, the role check, a constant answer).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from bench import measure
from bench.urls import AUTHED_BASELINE_PATH

CALLS = 100_000
OTHER_TENANT_CALLS = 20_000

_INSERT = f"""
INSERT INTO {ToolCall._meta.db_table} (
    id, tenant_id, created_at, updated_at, agent_key, tool, resolved_tool, args, decision, status, error,
    duration_ms, for_llm_bytes, for_user_bytes, session_key, user_id, channel, chat_id, origin, provider,
    subagent_depth, actor_kind, actor_id, request_id)
SELECT gen_random_uuid(), %(tenant)s, now() - (n * interval '7 days' / %(count)s), now(),
       'agent-' || lpad((n %% 20)::text, 2, '0'), 'tool-' || (n %% 40), '', '{{}}'::jsonb,
       CASE WHEN n %% 50 = 0 THEN 'denied' WHEN n %% 97 = 0 THEN 'invalid' ELSE 'allowed' END,
       CASE WHEN n %% 50 = 0 OR n %% 97 = 0 OR n %% 13 = 0 THEN 'error' ELSE 'ok' END,
       '', (n %% 1000) * 0.7, 100, 100, 'bench-' || (n %% 100), '', '', '', 'user', '', 0,
       CASE WHEN n %% 4 = 0 THEN 'user' ELSE 'api_key' END, 'bench-actor-' || (n %% 4), ''
  FROM generate_series(1, %(count)s) AS n
"""  # noqa: S608 (the only interpolation is the table name, a constant)


def _fill(tenant: Tenant, count: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_INSERT, {"tenant": tenant.pk, "count": count})


def _user(tenant: Tenant, role: str, email: str) -> Any:
    membership = services.membership_create(
        actor=Actor.system(tenant), email=email, role=role, password="Quartz-lantern-8142-river"
    )
    return get_user_model().objects.get(pk=membership.user_id)


def run(*, tenant: Tenant, api_key: str, seconds: float) -> list[str]:
    """Seed the calls, time each endpoint and the page, and return the lines of a Markdown table."""
    _fill(tenant, CALLS)
    _fill(
        services.tenant_create(slug="bench-overview-other", name="Bench overview other"), OTHER_TENANT_CALLS
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ToolCall._meta.db_table}")
    admin = _user(tenant, Role.ADMIN, "overview-admin@bench.test")
    member = _user(tenant, Role.MEMBER, "overview-member@bench.test")
    auth = {"Authorization": f"Bearer {api_key}"}

    def week_total(response: object) -> None:
        body = response.json()  # type: ignore[attr-defined]
        total = sum(bucket["total"] for bucket in body["buckets"])
        # The window ends at the next 6-hour boundary: at most 6 of the 168 hours' calls fall before it.
        assert total >= CALLS * (1 - 6 / 168), total

    endpoints = [
        measure.Endpoint("baseline: authenticated DRF APIView (API key)", AUTHED_BASELINE_PATH, auth),
        measure.Endpoint(
            "GET /api/v1/stats/tool-calls?range=hour", "/api/v1/stats/tool-calls?range=hour", auth
        ),
        measure.Endpoint(
            "GET /api/v1/stats/tool-calls?range=day", "/api/v1/stats/tool-calls?range=day", auth
        ),
        measure.Endpoint(
            "GET /api/v1/stats/tool-calls?range=week", "/api/v1/stats/tool-calls?range=week", auth, week_total
        ),
        measure.Endpoint("GET /api/v1/stats/top?range=day", "/api/v1/stats/top?range=day", auth),
        measure.Endpoint("GET /api/v1/stats/top?range=week", "/api/v1/stats/top?range=week", auth),
        measure.Endpoint(
            "GET /api/v1/stats/needs-you?range=week", "/api/v1/stats/needs-you?range=week", auth
        ),
    ]
    results: list[measure.Result] = []
    with override_settings(ROOT_URLCONF="bench.urls", ALLOWED_HOSTS=["testserver"]):
        client = Client()
        for endpoint in endpoints:
            results.append(measure.run(client, endpoint, seconds=seconds))
        admin_client = Client()
        admin_client.force_login(admin)
        results.append(
            measure.run(
                admin_client, measure.Endpoint("GET / (the Overview page, admin)", "/"), seconds=seconds
            )
        )
        member_client = Client()
        member_client.force_login(member)
        results.append(
            measure.run(
                member_client,
                measure.Endpoint(
                    "GET /api/v1/stats/tool-calls?range=week (member, own)",
                    "/api/v1/stats/tool-calls?range=week",
                ),
                seconds=seconds,
            )
        )

    baseline = results[0]
    lines = [
        f"The Overview with {CALLS:,} tool calls over 7 days "
        f"(bench.overview; {OTHER_TENANT_CALLS:,} in another tenant):",
        "",
        "| endpoint | req/s | p50 ms | p95 ms | queries/req | vs baseline |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.label} | {r.rps:,.0f} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | {r.queries_text()} "
            f"| {r.mean_ms / baseline.mean_ms:.1f}x |"
        )
    return lines
