"""Consequences of MCP decisions, through HTTP: an agent grant says which of its tools the agent's policy
keeps and which it removes (REST ``effective_tools`` / ``removed_by_policy``, the server page's
warning), and a rejection needs a note saying why (400 otherwise, with nothing changed)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.mcp_grants import services
from apps.mcp_grants.models import AccessRequest
from apps.policy import services as policy_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.personas import error
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db

SERVERS = "/api/v1/mcp/servers/"
REQUESTS = "/api/v1/mcp/requests/"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json()


def deny(tenant: Tenant, agent: Agent, names: list[str]) -> None:
    policy_services.policy_save(
        Actor.system(tenant), policy_services.target("agent", agent=agent), {"deny": names}
    )


def test_a_grant_says_which_tools_the_policy_removes(admin_a, tenant_a, agent):
    system = Actor.system(tenant_a)
    server = make_server(tenant_a, "pg", ["query", "schema", "drop"])
    services.agent_grant_set(actor=system, server=server, agent=agent, tool_deny=["schema"])
    grant = ok(admin_a.get(SERVERS + "pg/grants/agents/bot/"))
    assert (grant["effective_tools"], grant["removed_by_policy"]) == (["mcp_pg__drop", "mcp_pg__query"], [])

    deny(tenant_a, agent, ["mcp_pg__drop"])
    for body in (
        ok(admin_a.get(SERVERS + "pg/grants/agents/bot/")),
        ok(admin_a.get(SERVERS + "pg/grants/"))["agent_grants"][0],
        ok(admin_a.get("/api/v1/agents/bot/mcp-grants/"))[0],
    ):
        # The grant's own deny list is not the policy's doing: schema is in neither list.
        assert (body["effective_tools"], body["removed_by_policy"]) == (["mcp_pg__query"], ["mcp_pg__drop"])
    # The same as the agent's tool list.
    listed = ok(admin_a.get("/api/v1/agents/bot/tools?format=mcp"))
    assert [t["name"] for t in listed["tools"] if t["name"].startswith("mcp_")] == ["mcp_pg__query"]

    # A disabled grant gives nothing today; it says what the policy would remove once enabled.
    services.agent_grant_set(actor=system, server=server, agent=agent, enabled=False)
    grant = ok(admin_a.get(SERVERS + "pg/grants/agents/bot/"))
    assert (grant["effective_tools"], grant["removed_by_policy"]) == (
        ["mcp_pg__query", "mcp_pg__schema"],
        ["mcp_pg__drop"],
    )


def test_a_policy_group_removes_every_tool_of_the_server(admin_a, tenant_a, agent):
    server = make_server(tenant_a, "pg", ["query", "schema"])
    services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    deny(tenant_a, agent, ["group:mcp:pg"])
    grant = ok(admin_a.get(SERVERS + "pg/grants/agents/bot/"))
    assert (grant["effective_tools"], grant["removed_by_policy"]) == ([], ["mcp_pg__query", "mcp_pg__schema"])


def test_the_server_page_warns_when_the_policy_removes_tools(client, tenant_a, agent):
    system = Actor.system(tenant_a)
    server = make_server(tenant_a, "pg", ["query", "schema", "drop"])
    services.agent_grant_set(actor=system, server=server, agent=agent)
    url = reverse("dashboard:mcp_server", args=[server.pk])
    viewer = factories.make_user(tenant_a, Role.VIEWER, email="viewer@a.test")
    client.force_login(viewer)
    page = client.get(url).content.decode()
    assert "Effective tools" in page
    assert "data-policy-removes" not in page

    deny(tenant_a, agent, ["mcp_pg__drop", "mcp_pg__schema"])
    page = client.get(url).content.decode()
    assert "Policy removes 2 of 3 tools" in page
    assert "<del><code>mcp_pg__drop</code></del><del><code>mcp_pg__schema</code></del>" in page
    assert reverse("dashboard:policy_agent", args=["bot"]) in page


def test_a_rejection_needs_a_note(admin_a, tenant_a, agent):
    server = make_server(tenant_a, "pg", ["query"])
    req = services.request_create(actor=Actor.system(tenant_a), server=server, scope="agent", agent=agent)
    reject = f"{REQUESTS}{req.pk}/reject"
    audits = AuditEvent.objects.for_tenant(tenant_a).count()
    for body in ({}, {"note": ""}, {"note": "   "}, {"note": None}, {"note": "x" * 2001}):
        refused = error(admin_a.post(reject, body, format="json"), 400, "invalid")
        assert "note" in refused["details"], body
    req.refresh_from_db()
    assert (req.status, req.reviewed_by) == (AccessRequest.Status.PENDING, "")
    assert AuditEvent.objects.for_tenant(tenant_a).count() == audits

    rejected = ok(admin_a.post(reject, {"note": "  use the replica "}, format="json"))
    assert (rejected["status"], rejected["review_note"]) == ("rejected", "use the replica")


def test_the_service_refuses_a_rejection_without_a_note(tenant_a, agent):
    from apps.tenants.errors import ServiceError

    system = Actor.system(tenant_a)
    req = services.request_create(
        actor=system, server=make_server(tenant_a, "pg", ["query"]), scope="agent", agent=agent
    )
    with pytest.raises(ServiceError) as refused:
        services.request_review(actor=system, request_id=req.pk, approved=False, note=" ")
    assert refused.value.status == 400
    req.refresh_from_db()
    assert req.status == AccessRequest.Status.PENDING


def test_discovery_publishes_the_rows_of_the_tool_list_after_commit(tenant_a):
    """What the server page's live tool list is built from: each tool's registered name, description
    and schema, bounded; published once the discovery's transaction commits, and only on a change."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer
    from channels_postgres.models import Message

    from apps.mcp_grants import client
    from apps.realtime import events

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "mcp"), channel)

    def published() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    server = make_server(tenant_a, "pg", [])
    Message.objects.filter(channel=channel).delete()
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(400)}}
    found = [
        client.ToolInfo("query", "Run a <b>query</b>" + "x" * 600, {"type": "object"}),
        client.ToolInfo("wide", "", huge),
    ]
    assert client.store_tools(client.endpoint_for(server), found) is True
    [event] = published()
    assert (event["type"], event["data"]["tools"]) == ("mcp.server.tools", ["query", "wide"])
    query, wide = event["data"]["tool_rows"]
    assert (query["name"], query["registered"]) == ("query", "mcp_pg__query")
    assert query["description"].startswith("Run a <b>query</b>")
    assert len(query["description"]) == client.EVENT_DESCRIPTION_CHARS
    assert '"type": "object"' in query["schema"]
    assert (wide["registered"], wide["schema"]) == ("mcp_pg__wide", "")  # too long for an event
    # Nothing changed: nothing is published.
    assert client.store_tools(client.endpoint_for(server), found) is False
    assert len(published()) == 1


def test_the_agents_mcp_page_shows_each_grants_effective_tools(client, tenant_a, tenant_b, agent):
    system = Actor.system(tenant_a)
    # Servers that end at once: the page lists their resources and prompts too, and must not wait on
    # a server that never answers (npx, the default, would be fetched from the registry).
    pg = make_server(tenant_a, "pg", ["query", "drop"], command="python3", args=["missing-server.py"])
    search = make_server(tenant_a, "search", ["find"], command="python3", args=["missing-server.py"])
    services.agent_grant_set(actor=system, server=pg, agent=agent)
    services.agent_grant_set(actor=system, server=search, agent=agent)
    deny(tenant_a, agent, ["mcp_pg__drop"])
    client.force_login(factories.make_user(tenant_a, Role.VIEWER, email="viewer@a.test"))
    page = client.get(reverse("dashboard:agent_mcp", args=["bot"])).content.decode()
    assert page.count("data-policy-removes") == 1  # pg's grant only
    assert "Policy removes 1 of 2 tools" in page
    assert "<code>mcp_search__find</code>" in page
    # Neither server answers: each is named with the reason, asked once (not once per list).
    left_out = page[page.index("data-mcp-unreachable") :]
    assert "<code>pg</code>" in left_out
    assert "<code>search</code>" in left_out
    assert "could not connect" in left_out

    # Another tenant's agent of the same key is not found.
    outsider = factories.make_user(tenant_b, Role.ADMIN, email="admin@b.test")
    client.force_login(outsider)
    assert client.get(reverse("dashboard:agent_mcp", args=["bot"])).status_code == 404
