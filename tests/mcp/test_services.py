"""MCP services: audited without secrets, encrypted at rest, the access-request review transaction,
config_changed, events on the "mcp" topic, and what the policy engine sees."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.mcp_grants import reachability, services
from apps.mcp_grants.models import AccessRequest, AgentGrant, MCPServer, UserGrant
from apps.policy import engine
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Tenant
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db

SECRETS = ("hdr-secret-1234", "env-secret-5678", "key-secret-9012")


@pytest.fixture
def system(tenant_a):
    return Actor.system(tenant_a)


@pytest.fixture
def agent(system):
    return tenant_services.agent_create(actor=system, key="bot", name="Bot")


def version(tenant: Tenant) -> int:
    return Tenant.objects.get(pk=tenant.pk).config_version


def http_server(tenant, name="remote"):
    return make_server(
        tenant,
        name,
        [],
        transport="streamable-http",
        command="",
        url="https://mcp.example.com/mcp",
        headers={"Authorization": f"Bearer {SECRETS[0]}"},
        api_key=SECRETS[2],
    )


def test_secrets_encrypted_at_rest_and_never_audited(tenant_a, system):
    server = make_server(tenant_a, "local", [], env={"TOKEN": SECRETS[1], "HOME": "env:HOME"})
    remote = http_server(tenant_a)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM mcp_grants_mcpserver WHERE tenant_id = %s", [tenant_a.pk])
        raw = json.dumps(cursor.fetchall(), default=str)
    assert "local" in raw
    for secret in SECRETS:
        assert secret not in raw
    loaded = MCPServer.objects.for_tenant(tenant_a).get(pk=remote.pk)
    assert loaded.headers == {"Authorization": f"Bearer {SECRETS[0]}"}
    assert loaded.api_key == SECRETS[2]
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).env["TOKEN"] == SECRETS[1]
    services.server_update(actor=system, server=remote, api_key="key-secret-rotated", timeout_sec=30)
    events = AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="mcp.server")
    assert [e.verb for e in events.order_by("created_at")] == [
        "mcp.server.created",
        "mcp.server.created",
        "mcp.server.updated",
    ]
    dumped = json.dumps([e.data for e in events])
    for secret in (*SECRETS, "key-secret-rotated"):
        assert secret not in dumped
    updated = events.get(verb="mcp.server.updated").data
    assert updated["changed"] == ["api_key", "timeout_sec"]
    assert updated["headers"] == ["Authorization"]
    assert updated["has_api_key"] is True


def test_invalid_registration_changes_nothing(tenant_a, system):
    before = version(tenant_a)
    with pytest.raises(ServiceError) as exc:
        services.server_create(
            actor=system, name="evil", transport="stdio", command="bash", args=["-c", "id"]
        )
    assert exc.value.details.keys() == {"command", "args"}
    with pytest.raises(ServiceError) as exc:
        services.server_create(
            actor=system, name="meta", transport="sse", url="http://169.254.169.254/latest/meta-data/"
        )
    assert "url" in exc.value.details
    with pytest.raises(ServiceError):
        services.server_create(actor=system, name="Bad__Name", transport="stdio", command="npx")
    assert not MCPServer.objects.for_tenant(tenant_a).exists()
    assert version(tenant_a) == before
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="mcp.").exists()


def test_names_and_prefixes_are_unique_per_tenant(tenant_a, tenant_b, system):
    make_server(tenant_a, "my-db", [])
    with pytest.raises(ServiceError) as exc:
        make_server(tenant_a, "my_db", [])  # both register as mcp_my_db__<tool>
    assert exc.value.status == 409
    with pytest.raises(ServiceError):
        make_server(tenant_a, "other", [], tool_prefix="my_db")
    with pytest.raises(ServiceError):
        make_server(tenant_a, "my-db", [])
    make_server(tenant_b, "my-db", [])  # another tenant may use the same name


def test_grants_raise_config_version_and_publish(tenant_a, system, agent, monkeypatch):
    server = make_server(tenant_a, "pg", ["query"])
    published = []
    monkeypatch.setattr("apps.realtime.events.publish", lambda **kw: published.append(kw))
    before = version(tenant_a)
    grant = services.agent_grant_set(actor=system, server=server, agent=agent, tool_allow=["query"])
    assert version(tenant_a) == before + 1
    mcp_events = [p for p in published if p["topic"] == "mcp"]
    assert [p["type"] for p in mcp_events] == ["mcp.agent_grant.created"]
    assert mcp_events[0]["data"]["tool_allow"] == ["query"]
    audit = AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.agent_grant.created")
    assert audit.data["agent"] == "bot"
    assert audit.data["tool_allow"] == ["query"]
    services.grant_delete(actor=system, grant=grant)
    assert version(tenant_a) == before + 2
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()
    with pytest.raises(ServiceError):
        services.agent_grant_set(actor=system, server=server, agent=agent, tool_allow="query")  # type: ignore[arg-type]
    with pytest.raises(ServiceError):
        services.user_grant_set(actor=system, server=server, user_id="system")


def test_request_forced_pending_then_approved_with_narrowing(tenant_a, system, agent):
    server = make_server(tenant_a, "pg", ["query", "schema", "drop"])
    req = services.request_create(
        actor=system,
        server=server,
        scope="agent",
        agent=agent,
        tool_allow=["query", "schema"],
        reason="reports",
    )
    assert req.status == "pending"
    assert reachability.accessible(tenant_a, agent, "") == []
    with pytest.raises(ServiceError):
        services.request_review(actor=system, request_id=req.pk, approved=True, tool_allow=["drop"])
    before = version(tenant_a)
    reviewed = services.request_review(
        actor=system, request_id=req.pk, approved=True, note="ok", tool_allow=["query"]
    )
    assert reviewed.status == "approved"
    assert reviewed.reviewed_at is not None
    assert reviewed.review_note == "ok"
    assert version(tenant_a) == before + 1
    grant = AgentGrant.objects.for_tenant(tenant_a).get(server=server, agent=agent)
    assert grant.enabled
    assert grant.tool_allow == ["query"]
    assert [list(e.registered) for e in reachability.accessible(tenant_a, agent, "")] == [["mcp_pg__query"]]
    with pytest.raises(ServiceError) as again:
        services.request_review(actor=system, request_id=req.pk, approved=False, note="too late")
    assert again.value.status == 409
    assert again.value.message.startswith("request not pending: it was approved by system")
    audit = AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.request.approved")
    assert audit.data["grant"]["tool_allow"] == ["query"]


def test_approval_updates_a_disabled_grant(tenant_a, system, agent):
    server = make_server(tenant_a, "pg", ["query", "schema"])
    services.agent_grant_set(actor=system, server=server, agent=agent, enabled=False, tool_allow=["schema"])
    req = services.request_create(actor=system, server=server, scope="agent", agent=agent, tool_allow=None)
    services.request_review(actor=system, request_id=req.pk, approved=True)
    grant = AgentGrant.objects.for_tenant(tenant_a).get(server=server, agent=agent)
    assert grant.enabled
    assert grant.tool_allow is None


def test_rejection_leaves_no_grant(tenant_a, system):
    server = make_server(tenant_a, "pg", ["query"])
    req = services.request_create(actor=system, server=server, scope="user", user_id="u1", reason="please")
    before = version(tenant_a)
    services.request_review(actor=system, request_id=req.pk, approved=False, note="no")
    assert AccessRequest.objects.for_tenant(tenant_a).get(pk=req.pk).status == "rejected"
    assert not UserGrant.objects.for_tenant(tenant_a).exists()
    assert version(tenant_a) == before


def test_review_is_tenant_scoped(tenant_a, tenant_b, system):
    server = make_server(tenant_a, "pg", ["query"])
    req = services.request_create(actor=system, server=server, scope="user", user_id="u1")
    with pytest.raises(ServiceError) as exc:
        services.request_review(actor=Actor.system(tenant_b), request_id=req.pk, approved=True)
    assert exc.value.status == 404
    assert AccessRequest.objects.for_tenant(tenant_a).get(pk=req.pk).status == "pending"
    assert not UserGrant.objects.for_tenant(tenant_a).exists()


def test_failed_approval_rolls_back(tenant_a, system, agent, monkeypatch):
    server = make_server(tenant_a, "pg", ["query"])
    req = services.request_create(actor=system, server=server, scope="agent", agent=agent)

    def fail(tenant):
        raise RuntimeError("late failure")

    monkeypatch.setattr(services, "config_changed", fail)  # fails after the status and grant writes
    with pytest.raises(RuntimeError):
        services.request_review(actor=system, request_id=req.pk, approved=True)
    assert AccessRequest.objects.for_tenant(tenant_a).get(pk=req.pk).status == "pending"
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()


def test_policy_engine_sees_mcp_tools_and_groups(tenant_a, system, agent):
    server = make_server(tenant_a, "github", ["list_issues", "create_issue"])
    other = make_server(tenant_a, "pg", ["query"])
    services.agent_grant_set(actor=system, server=server, agent=agent, tool_deny=["create_issue"])
    target = policy_services.target("tenant")
    # a policy naming MCP tools and groups of the tenant validates (other's tools too: agent=None universe)
    policy_services.policy_save(system, target, {"deny": ["group:mcp:pg", "mcp_github__create_issue"]})
    with pytest.raises(ServiceError):
        policy_services.policy_save(system, target, {"deny": ["mcp_github__nope"]})
    tenant_a.refresh_from_db()
    resolved = engine.resolve(tenant_a, agent, engine.CallScope())
    assert "mcp_github__list_issues" in resolved.tools
    assert "mcp_github__create_issue" not in resolved.tools
    assert "mcp_pg__query" not in resolved.tools
    assert resolved.universe.group("mcp:github") == frozenset({"mcp_github__list_issues"})
    assert resolved.universe.expand(["group:mcp"]) == {"mcp_github__list_issues"}
    # granting the second server reaches the engine at once (config_version moved)
    services.agent_grant_set(actor=system, server=other, agent=agent)
    tenant_a.refresh_from_db()
    resolved = engine.resolve(tenant_a, agent, engine.CallScope())
    assert "mcp_pg__query" not in resolved.tools  # denied by the tenant policy
    assert resolved.universe.group("mcp:pg") == frozenset({"mcp_pg__query"})
    policy_services.policy_save(system, target, {})
    tenant_a.refresh_from_db()
    assert "mcp_pg__query" in engine.resolve(tenant_a, agent, engine.CallScope()).tools


def test_server_delete_removes_grants_and_access(tenant_a, system, agent):
    server = make_server(tenant_a, "pg", ["query"])
    services.agent_grant_set(actor=system, server=server, agent=agent)
    services.request_create(actor=system, server=server, scope="agent", agent=agent)
    before = version(tenant_a)
    services.server_delete(actor=system, server=server)
    assert version(tenant_a) == before + 1
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()
    assert not AccessRequest.objects.for_tenant(tenant_a).exists()
    assert reachability.accessible(tenant_a, agent, "") == []
    assert AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.server.deleted").data["name"] == "pg"
    with pytest.raises(ServiceError) as exc:
        services.server_delete(actor=system, server=server)
    assert exc.value.status == 404


def test_user_request_approval_creates_a_narrowing_user_grant(tenant_a, system, agent):
    server = make_server(tenant_a, "pg", ["query", "schema"])
    services.agent_grant_set(actor=system, server=server, agent=agent)
    req = services.request_create(
        actor=system, server=server, scope="user", user_id="u1", tool_allow=["schema"]
    )
    assert req.agent is None
    services.request_review(actor=system, request_id=req.pk, approved=True)
    grant = UserGrant.objects.for_tenant(tenant_a).get(server=server, user_id="u1")
    assert grant.enabled
    assert grant.tool_allow == ["schema"]
    assert [list(e.registered) for e in reachability.accessible(tenant_a, agent, "u1")] == [
        ["mcp_pg__schema"]
    ]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scope": "team", "user_id": "u1"}, "scope"),
        ({"scope": "agent"}, "agent"),
        ({"scope": "user", "user_id": ""}, "user_id"),
        ({"scope": "user", "user_id": "u" * 300}, "user_id"),
        ({"scope": "user", "user_id": "u1", "reason": "r" * 3000}, "reason"),
        ({"scope": "user", "user_id": "u1", "tool_allow": ["a"] * 1001}, "tool_allow"),
        ({"scope": "user", "user_id": "u1", "tool_allow": [""]}, "tool_allow"),
        ({"scope": "user", "user_id": "u1", "tool_allow": "query"}, "tool_allow"),
    ],
)
def test_request_input_is_bounded(tenant_a, system, fields, field):
    server = make_server(tenant_a, "pg", ["query"])
    with pytest.raises(ServiceError) as exc:
        services.request_create(actor=system, server=server, **fields)
    assert field in exc.value.details
    assert not AccessRequest.objects.for_tenant(tenant_a).exists()


def test_pending_requests_are_per_tenant_and_oldest_first(tenant_a, tenant_b, system, agent):
    from apps.mcp_grants.selectors import pending_requests

    server = make_server(tenant_a, "pg", ["query"])
    first = services.request_create(actor=system, server=server, scope="user", user_id="u1")
    second = services.request_create(actor=system, server=server, scope="agent", agent=agent)
    third = services.request_create(actor=system, server=server, scope="user", user_id="u2")
    services.request_review(actor=system, request_id=second.pk, approved=False, note="no")
    make_server(tenant_b, "pg", ["query"])
    assert [r.pk for r in pending_requests(tenant_a)] == [first.pk, third.pk]
    assert list(pending_requests(tenant_b)) == []


def test_mcp_topic_is_for_administrators():
    from apps.realtime.events import topic_role
    from apps.tenants.roles import Role

    assert topic_role("mcp") == Role.ADMIN


def test_a_token_in_the_url_or_an_argument_is_not_audited(tenant_a, system):
    make_server(
        tenant_a,
        "argy",
        [],
        args=["--api-key=sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2", "--verbose"],
        env={"TOKEN": "env-secret-in-args"},
    )
    make_server(
        tenant_a,
        "query",
        [],
        transport="streamable-http",
        command="",
        url="https://mcp.example.com/mcp?token=q-secret-abcdefgh",
    )
    dumped = json.dumps(
        [e.data for e in AuditEvent.objects.for_tenant(tenant_a).filter(verb="mcp.server.created")]
    )
    assert "A1b2C3d4E5f6G7h8I9j0K1l2" not in dumped
    assert "q-secret-abcdefgh" not in dumped
    assert "--verbose" in dumped
    assert "[REDACTED]" in dumped
