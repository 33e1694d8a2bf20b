"""The Overview's aggregate endpoints: buckets and percentiles against rows of known times and
durations, who sees the tenant's figures and who their own, the other tenant's nothing, bounded queries."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps.accounts import services as account_services
from apps.audit import selectors
from apps.audit.models import ToolCall
from apps.audit.selectors import STATS_RANGES, stats_window
from apps.mcp_grants.models import AccessRequest, MCPServer
from apps.policy.approval_models import ApprovalStatus, PendingApproval
from apps.runs.models import Run
from apps.sessions.models import Session
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.personas import check_personas, error
from tests.dashboard.personas import login

pytestmark = pytest.mark.django_db

ROUTES = ["/api/v1/stats/tool-calls", "/api/v1/stats/top", "/api/v1/stats/needs-you"]


def _call(
    tenant: Tenant,
    at: Any,
    *,
    tool: str = "datetime",
    agent: str = "bot",
    decision: str = "allowed",
    status: str = "ok",
    duration: float = 0.0,
    actor: tuple[str, str] = ("system", "system"),
) -> ToolCall:
    call = ToolCall.objects.create(
        tenant=tenant,
        agent_key=agent,
        tool=tool,
        decision=decision,
        status=status,
        duration_ms=duration,
        actor_kind=actor[0],
        actor_id=actor[1],
    )
    ToolCall.objects.for_tenant(tenant).filter(pk=call.pk).update(created_at=at)
    return call


def _bucket(body: dict[str, Any], at: Any) -> dict[str, Any]:
    wanted = at.isoformat().replace("+00:00", "Z")
    found = [b for b in body["buckets"] if b["start"] in (wanted, at.isoformat())]
    assert len(found) == 1, (wanted, [b["start"] for b in body["buckets"]][:5])
    return found[0]


def test_buckets_count_outcomes_and_percentiles(tenant_a, tenant_b, admin_a):
    hour = STATS_RANGES["hour"]
    start, _end = stats_window(hour)
    a, b = start + timedelta(minutes=30), start + timedelta(minutes=40)
    for duration in range(10, 101, 10):
        _call(tenant_a, a + timedelta(seconds=5), duration=duration)
    _call(tenant_a, a + timedelta(seconds=6), decision="denied", status="error")
    _call(tenant_a, a + timedelta(seconds=7), decision="safeguard", status="error")
    _call(tenant_a, a + timedelta(seconds=8), decision="invalid", status="error")
    for duration in (1, 2, 3):
        _call(tenant_a, b + timedelta(seconds=59), duration=duration)
    _call(tenant_a, b, status="error", duration=1000)
    _call(tenant_a, start - timedelta(seconds=1), duration=5)  # before the window
    _call(tenant_b, a + timedelta(seconds=5), duration=100000)  # another tenant's

    response = admin_a.get("/api/v1/stats/tool-calls?range=hour")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["scope"] == "tenant"
    assert (body["range"], body["bucket_seconds"], len(body["buckets"])) == ("hour", 60, 60)
    first = _bucket(body, a)
    assert first == {
        "start": first["start"],
        "total": 13,
        "ok": 10,
        "error": 0,
        "denied": 2,
        "refused": 1,
        "p50_ms": 55.0,
        "p95_ms": 95.5,
        "error_rate": 0.0,
    }
    second = _bucket(body, b)
    assert (second["total"], second["ok"], second["error"], second["error_rate"]) == (4, 3, 1, 0.25)
    assert (second["p50_ms"], second["p95_ms"]) == (2.5, 850.45)
    empty = [bk for bk in body["buckets"] if bk["start"] not in (first["start"], second["start"])]
    assert all(bk["total"] == 0 and bk["p95_ms"] is None and bk["error_rate"] is None for bk in empty)

    week = admin_a.get("/api/v1/stats/tool-calls?range=week").json()
    assert (week["bucket_seconds"], len(week["buckets"])) == (6 * 3600, 28)
    assert sum(bk["total"] for bk in week["buckets"]) == 18


def test_top_tools_and_agents(tenant_a, admin_a):
    now = timezone.now()
    for index in range(12):
        for _ in range(index + 1):
            _call(tenant_a, now - timedelta(minutes=5), tool=f"tool{index:02}", agent=f"agent{index % 3}")
    _call(tenant_a, now - timedelta(minutes=5), tool="tool11", status="error")
    _call(tenant_a, now - timedelta(days=2), tool="old", agent="old-agent")
    body = admin_a.get("/api/v1/stats/top?range=day").json()
    assert [row["name"] for row in body["tools"]] == [f"tool{i:02}" for i in range(11, 1, -1)]
    assert body["tools"][0] == {"name": "tool11", "calls": 13, "failed": 1}
    assert [row["name"] for row in body["agents"]] == ["agent2", "agent1", "agent0", "bot"]
    week = admin_a.get("/api/v1/stats/top?range=week").json()
    assert "old-agent" in [row["name"] for row in week["agents"]]


def test_a_member_sees_their_own_calls_and_runs(tenant_a, admin_a):
    now = timezone.now() - timedelta(seconds=30)
    member = factories.make_user(tenant_a, Role.MEMBER)
    system = Actor.system(tenant_a)
    key, _ = account_services.api_key_create(actor=system, name="member's", role=Role.MEMBER)
    ApiKey.objects.for_tenant(tenant_a).filter(pk=key.pk).update(created_by=member)
    _call(tenant_a, now, tool="by-user", actor=("user", str(member.pk)))
    _call(tenant_a, now, tool="by-their-key", actor=("api_key", str(key.pk)))
    _call(tenant_a, now, tool="by-others", actor=("user", "999999"))
    _call(tenant_a, now, tool="by-others", actor=("system", "system"))
    session_client = login(member)

    series = session_client.get("/api/v1/stats/tool-calls?range=hour").json()
    assert series["scope"] == "own"
    assert sum(bk["total"] for bk in series["buckets"]) == 2
    top = session_client.get("/api/v1/stats/top?range=hour").json()
    assert sorted(row["name"] for row in top["tools"]) == ["by-their-key", "by-user"]
    tenant_wide = admin_a.get("/api/v1/stats/top?range=hour").json()
    assert sorted(row["name"] for row in tenant_wide["tools"]) == ["by-others", "by-their-key", "by-user"]
    assert tenant_wide["scope"] == "tenant"

    agent = account_services.agent_create(actor=system, key="bot", name="Bot")
    session = Session.objects.create(tenant=tenant_a, agent=agent, key="s1")
    for kind, id_ in (("user", str(member.pk)), ("api_key", str(key.pk)), ("user", "999999")):
        Run.objects.create(
            tenant=tenant_a,
            agent=agent,
            session=session,
            status=Run.Status.FAILED,
            started_by_kind=kind,
            started_by_id=id_,
        )
    needs = session_client.get("/api/v1/stats/needs-you").json()
    assert needs["failed_runs"] == 2
    assert needs["open_escalations"] is None
    assert needs["mcp_servers_not_connected"] is None
    assert admin_a.get("/api/v1/stats/needs-you").json()["failed_runs"] == 3


def test_needs_you_counts_what_waits(tenant_a, tenant_b, admin_a):
    system = Actor.system(tenant_a)
    agent = account_services.agent_create(actor=system, key="bot", name="Bot")
    now = timezone.now()
    for tenant in (tenant_a, tenant_b):
        for expires, status in (
            (120, ApprovalStatus.PENDING),
            (600, ApprovalStatus.PENDING),
            (-5, ApprovalStatus.PENDING),
            (600, ApprovalStatus.DENIED),
        ):
            PendingApproval.objects.create(
                tenant=tenant,
                agent_key="bot",
                call_id="c",
                tool="exec",
                command="ls",
                reason="r",
                requested_by_kind="system",
                requested_by_id="system",
                status=status,
                expires_at=now + timedelta(seconds=expires),
            )
    for health in (MCPServer.Status.CONNECTED, MCPServer.Status.ERROR, MCPServer.Status.UNKNOWN):
        MCPServer.objects.create(
            tenant=tenant_a,
            name=f"s-{health}",
            transport="streamable-http",
            url="https://example.com/mcp",
            status=health,
        )
    MCPServer.objects.create(
        tenant=tenant_a,
        name="off",
        transport="streamable-http",
        url="https://example.com/mcp",
        status=MCPServer.Status.ERROR,
        enabled=False,
    )
    server = MCPServer.objects.for_tenant(tenant_a).order_by("name").first()
    assert server is not None
    AccessRequest.objects.create(
        tenant=tenant_a,
        server=server,
        scope="agent",
        agent=agent,
        requester_kind="system",
        requester_id="system",
    )
    body = admin_a.get("/api/v1/stats/needs-you").json()
    waiting = body["approvals_waiting"]
    assert waiting["count"] == 2
    assert 100 <= waiting["seconds_left"] <= 120
    assert body["mcp_servers_not_connected"] == 2
    assert body["pending_access_requests"] == 1
    assert body["open_escalations"] == 0
    assert body["failed_runs"] == 0


@pytest.mark.parametrize("url", ROUTES)
def test_personas(request, tenant_a, url):
    _call(tenant_a, timezone.now(), tool="secret-tool-of-a", agent="secret-agent-of-a")
    check_personas(
        request,
        tenant_a,
        method="get",
        url=url,
        body=None,
        least=Role.VIEWER,
        success=200,
        outsider_status=200,
        never_shown_to_outsider=("secret-tool-of-a", "secret-agent-of-a"),
    )


@pytest.mark.parametrize("url", ROUTES)
def test_the_other_tenant_sees_none_of_it(tenant_a, outsider, url):
    _call(tenant_a, timezone.now() - timedelta(seconds=1), tool="secret-tool-of-a")
    body = outsider.get(url + "?range=week").json()
    assert "secret-tool-of-a" not in str(body)
    if "buckets" in body:
        assert sum(bk["total"] for bk in body["buckets"]) == 0


@pytest.mark.parametrize("url", ROUTES)
def test_a_bad_range_is_refused(admin_a, url):
    envelope = error(admin_a.get(url + "?range=year"), 400, "invalid")
    assert "range" in str(envelope)


@pytest.mark.parametrize("url", ROUTES)
def test_queries_are_bounded(tenant_a, admin_a, url, django_assert_max_num_queries):
    now = timezone.now()
    for index in range(30):
        _call(tenant_a, now - timedelta(minutes=index), tool=f"t{index}", agent=f"a{index}")
    with django_assert_max_num_queries(8):
        assert admin_a.get(url + "?range=day").status_code == 200


def test_the_series_reads_through_a_tenant_index(tenant_a, tenant_b):
    now = timezone.now()
    rows = [
        ToolCall(
            tenant=tenant,
            agent_key="bot",
            tool="datetime",
            decision="allowed",
            status="ok",
            actor_kind="system",
            actor_id="system",
        )
        for tenant in (tenant_a, tenant_b)
        for _ in range(1500)
    ]
    ToolCall.objects.for_tenant(tenant_a).bulk_create(rows)
    for index, call in enumerate(rows):
        call.created_at = now - timedelta(hours=index % (24 * 60))
    ToolCall.objects.dangerously_all_tenants().bulk_update(rows, ["created_at"], batch_size=500)
    start, end = stats_window(STATS_RANGES["week"])
    params: dict[str, Any] = {
        "step": timedelta(hours=6),
        "start": start,
        "end": end,
        "tenant": tenant_a.pk,
        "denied": ["denied"],
        "everyone": True,
        "kinds": [],
        "ids": [],
    }
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE audit_toolcall")
        cursor.execute("EXPLAIN " + selectors.SERIES_SQL, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # An index scan bounded by the tenant (the planner picks ``toolcall_tenant_time`` or the tenant's own
    # index by its statistics of the moment), never a scan of every tenant's calls.
    assert "Seq Scan on audit_toolcall" not in plan, plan
    assert re.search(r"Index (Only )?Scan (using|on) (toolcall|audit_toolcall)_tenant", plan), plan
    assert re.search(r"Index Cond: \(+tenant_id = ", plan), plan
