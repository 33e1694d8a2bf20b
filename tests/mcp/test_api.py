"""The MCP REST API: server registration (validation, SSRF and command refusals, bounds), discovered
tools, grants that change an agent's tool list, users' write-only credentials, and access requests with
their review; every write audited and published, never with a secret."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.mcp_grants.models import (
    AccessRequest,
    AgentGrant,
    MCPServer,
    MCPServerTool,
    UserCredential,
    UserGrant,
)
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.personas import error
from tests.api.tenant_state import tenant_state
from tests.mcp.support import make_server

pytestmark = pytest.mark.django_db

SERVERS = "/api/v1/mcp/servers/"
REQUESTS = "/api/v1/mcp/requests/"
PUBLIC_URL = "https://93.184.216.34/mcp"  # a public address: no DNS lookup in the tests
# Queries of one agent's policy resolution (documents, grants, discovered tools, custom tools).
POLICY_QUERIES = 4
SECRETS = ("hdr-value-7c1f2a9e", "key-value-5d3b8e41", "env-value-9a4c7f20", "cred-key-3e8d1b66")


@pytest.fixture
def live_events():
    """Subscribes a channel of this process to a tenant's topic group (or to one actor's ``me``) and
    reads back what was delivered to it, in order."""
    layer = get_channel_layer()

    def subscribe(group: str):  # type: ignore[no-untyped-def]
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(group, channel)

        def read() -> list[dict[str, Any]]:
            rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
            return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

        return read

    return subscribe


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def audit(tenant: Tenant, prefix: str = "mcp.") -> list[AuditEvent]:
    return list(AuditEvent.objects.for_tenant(tenant).filter(verb__startswith=prefix).order_by("created_at"))


def tool_names(client: Any, agent_key: str = "bot", **params: str) -> list[str]:
    query = "&".join(f"{k}={v}" for k, v in {"format": "mcp", **params}.items())
    body = ok(client.get(f"/api/v1/agents/{agent_key}/tools?{query}"))
    return [t["name"] for t in body["tools"] if t["name"].startswith("mcp_")]


def http_body(name: str = "remote", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "transport": "streamable-http",
        "url": PUBLIC_URL,
        "headers": {"Authorization": f"Bearer {SECRETS[0]}"},
        "api_key": SECRETS[1],
        **extra,
    }


# --- servers ---------------------------------------------------------------------------------------------


def test_register_read_change_and_delete_servers_without_showing_secrets(
    admin_a, viewer_a, tenant_a, live_events
):
    published = live_events(events.group_name(tenant_a.pk, "mcp"))
    created = ok(admin_a.post(SERVERS, http_body(display_name="Remote"), format="json"), 201)
    assert created["name"] == "remote"
    assert created["headers"] == ["Authorization"]
    assert created["has_api_key"] is True
    assert created["registered_prefix"] == "mcp_remote"
    assert created["status"] == "unknown"
    assert "api_key" not in created
    stdio = {
        "name": "files",
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
        "env": {"TOKEN": SECRETS[2], "HOME": "env:HOME"},
        "tool_prefix": "fs",
        "timeout_sec": 30,
    }
    files = ok(admin_a.post(SERVERS, stdio, format="json"), 201)
    assert (files["env"], files["args"][2], files["registered_prefix"]) == (
        ["HOME", "TOKEN"],
        "/data",
        "mcp_fs",
    )

    listed = ok(viewer_a.get(SERVERS))
    assert [s["name"] for s in listed["results"]] == ["files", "remote"]
    assert ok(viewer_a.get(SERVERS + "remote/"))["display_name"] == "Remote"

    changed = ok(admin_a.patch(SERVERS + "remote/", {"api_key": "", "enabled": False}, format="json"))
    assert (changed["has_api_key"], changed["enabled"]) == (False, False)
    assert ok(admin_a.delete(SERVERS + "files/"), 204) is None
    assert admin_a.get(SERVERS + "files/").status_code == 404

    verbs = [e.verb for e in audit(tenant_a)]
    assert verbs == ["mcp.server.created", "mcp.server.created", "mcp.server.updated", "mcp.server.deleted"]
    assert audit(tenant_a)[2].data["changed"] == ["api_key", "enabled"]
    assert all(e.actor_kind == "api_key" for e in audit(tenant_a))
    assert [e["type"] for e in published()] == verbs
    shown = json.dumps([created, files, listed, changed, [e.data for e in audit(tenant_a)], published()])
    for secret in SECRETS:
        assert secret not in shown
    stored = MCPServer.objects.for_tenant(tenant_a).get(name="remote")
    assert stored.headers == {"Authorization": f"Bearer {SECRETS[0]}"}


def test_a_name_or_prefix_in_use_is_409_and_changes_nothing(admin_a, tenant_a):
    ok(admin_a.post(SERVERS, http_body("my-db"), format="json"), 201)
    before = tenant_state(tenant_a)
    error(admin_a.post(SERVERS, http_body("my-db"), format="json"), 409, "conflict")
    refused = error(
        admin_a.post(SERVERS, http_body("other", tool_prefix="my_db"), format="json"), 409, "conflict"
    )
    assert "mcp_my_db__<tool>" in refused["message"]
    assert tenant_state(tenant_a) == before


def private_name_resolver(host: str, port: int) -> list[str]:
    answers = {"mcp.corp.internal": ["10.20.30.40"], "rebind.example": ["93.184.216.34", "192.168.0.9"]}
    if host not in answers:
        raise OSError("no such host")
    return answers[host]


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"transport": "sse", "url": "http://127.0.0.1:8000/sse"}, "url", "blocked"),
        ({"transport": "sse", "url": "http://169.254.169.254/latest/meta-data/"}, "url", "blocked"),
        ({"transport": "sse", "url": "http://localhost/sse"}, "url", "blocked"),
        ({"transport": "sse", "url": "http://[::1]/sse"}, "url", "blocked"),
        ({"transport": "sse", "url": "http://10.0.0.5/sse"}, "url", "blocked"),
        ({"transport": "streamable-http", "url": "http://mcp.corp.internal/mcp"}, "url", "blocked"),
        ({"transport": "streamable-http", "url": "https://rebind.example/mcp"}, "url", "blocked"),
        ({"transport": "streamable-http", "url": "http://metadata.google.internal/"}, "url", "blocked"),
        ({"transport": "streamable-http", "url": "file:///etc/passwd"}, "url", "scheme"),
        ({"transport": "streamable-http", "url": "http://user:pw@93.184.216.34/"}, "url", "user name"),
        ({"transport": "streamable-http", "url": ""}, "url", "needs a URL"),
        ({"transport": "streamable-http", "url": PUBLIC_URL + "/" + "a" * 2100}, "url", "at most"),
        ({"transport": "stdio", "command": "bash"}, "command", "not an allowed command"),
        ({"transport": "stdio", "command": "/bin/sh"}, "command", "not an allowed command"),
        ({"transport": "stdio", "command": "npx; rm -rf /"}, "command", "metacharacters"),
        ({"transport": "stdio", "command": "../bin/node"}, "command", ".."),
        ({"transport": "stdio", "command": "npx", "args": ["-e", "x"]}, "args", "inline code"),
        ({"transport": "stdio", "command": "python3", "args": ["-c", "import os"]}, "args", "inline code"),
        ({"transport": "stdio", "command": "node", "args": ["--eval=1"]}, "args", "inline code"),
        ({"transport": "stdio", "command": "npx", "args": ["a|b"]}, "args", "metacharacters"),
        ({"transport": "stdio", "command": "npx", "args": ["__import__('os')"]}, "args", "not allowed"),
        ({"transport": "stdio", "command": "npx", "args": ["x"] * 65}, "args", "at most 64"),
        ({"transport": "stdio", "command": "npx", "args": ["a" * 4097]}, "args", "at most 4096"),
        ({"transport": "stdio", "command": "npx", "args": "--help"}, "args", "list of strings"),
        (
            {"transport": "stdio", "command": "npx", "env": {"K": "env:SECRET_KEY"}},
            "env",
            "may not be referenced",
        ),
        (
            {"transport": "stdio", "command": "npx", "env": {"K": "env:DATABASE_URL"}},
            "env",
            "may not be referenced",
        ),
        ({"transport": "stdio", "command": "npx", "env": {"K": 5}}, "env", "string"),
        (
            {"transport": "stdio", "command": "npx", "env": {f"K{i}": "v" for i in range(65)}},
            "env",
            "at most 64",
        ),
        ({"transport": "stdio", "command": "npx", "headers": {"X-A": "a\r\nB: c"}}, "headers", "line breaks"),
        ({"transport": "stdio", "command": "npx", "headers": {"X-A": "v" * 8193}}, "headers", "at most"),
        ({"transport": "stdio", "command": "npx", "timeout_sec": 0}, "timeout_sec", "1 to 600"),
        ({"transport": "stdio", "command": "npx", "timeout_sec": 601}, "timeout_sec", "1 to 600"),
        ({"transport": "stdio", "command": "npx", "timeout_sec": "30"}, "timeout_sec", "1 to 600"),
        ({"transport": "stdio", "command": "npx", "settings": {"x": "y" * 17000}}, "settings", "at most"),
        ({"transport": "stdio", "command": "npx", "display_name": "d" * 256}, "display_name", "at most"),
        ({"transport": "stdio", "command": "npx", "enabled": "yes"}, "enabled", "true or false"),
        ({"transport": "stdio", "command": "npx", "tool_prefix": "Bad Prefix"}, "tool_prefix", "lower-case"),
        ({"transport": "stdio", "command": "npx", "url": PUBLIC_URL}, "url", "no URL"),
        ({"transport": "websocket"}, "transport", "one of"),
    ],
)
def test_refused_registrations_are_400_by_field_and_change_nothing(
    admin_a, tenant_a, monkeypatch, body, field, fragment
):
    monkeypatch.setattr("apps.toolkit.ssrf.system_resolver", private_name_resolver)
    before = tenant_state(tenant_a)
    refused = error(admin_a.post(SERVERS, {"name": "evil", **body}, format="json"), 400, "invalid")
    assert field in refused["details"], refused
    assert fragment in " ".join(refused["details"][field]), refused
    assert refused["message"].startswith(f"{field}: ")
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad__Name", "transport": "stdio", "command": "npx"}, "name"),
        ({"name": "x" * 65, "transport": "stdio", "command": "npx"}, "name"),
        ({"name": 7, "transport": "stdio", "command": "npx"}, "name"),
        ({"name": "ok", "transport": "stdio", "command": ["npx"]}, "command"),
        ({"name": "ok", "transport": "stdio", "command": "npx", "owner": "me"}, "owner"),
        ({"transport": "stdio", "command": "npx"}, "name"),
    ],
)
def test_malformed_bodies_are_400(admin_a, tenant_a, body, field):
    before = tenant_state(tenant_a)
    refused = error(admin_a.post(SERVERS, body, format="json"), 400, "invalid")
    assert field in refused["details"]
    assert tenant_state(tenant_a) == before


def test_every_problem_is_reported_at_once(admin_a):
    body = {"name": "evil", "transport": "stdio", "command": "bash", "args": ["-c", "id"], "timeout_sec": 0}
    refused = error(admin_a.post(SERVERS, body, format="json"), 400, "invalid")
    assert set(refused["details"]) == {"command", "args", "timeout_sec"}


def test_a_change_is_validated_as_a_whole_and_the_name_is_fixed(admin_a, tenant_a):
    ok(admin_a.post(SERVERS, http_body(), format="json"), 201)
    before = tenant_state(tenant_a)
    refused = error(admin_a.patch(SERVERS + "remote/", {"transport": "stdio"}, format="json"), 400, "invalid")
    assert "command" in refused["details"]
    refused = error(
        admin_a.patch(SERVERS + "remote/", {"url": "http://10.1.1.1/"}, format="json"), 400, "invalid"
    )
    assert "url" in refused["details"]
    refused = error(admin_a.patch(SERVERS + "remote/", {"name": "renamed"}, format="json"), 400, "invalid")
    assert refused["details"] == {"name": ["Unknown field."]}
    assert tenant_state(tenant_a) == before
    # an unchanged update is no change: nothing audited
    ok(admin_a.patch(SERVERS + "remote/", {"url": PUBLIC_URL}, format="json"))
    assert tenant_state(tenant_a) == before


def test_server_list_is_paginated_and_bounded_in_queries(admin_a, tenant_a, django_assert_max_num_queries):
    for i in range(55):
        MCPServer.objects.create(tenant=tenant_a, name=f"s{i:02d}", transport="stdio", command="npx")
    with django_assert_max_num_queries(5):
        page = ok(admin_a.get(SERVERS))
    assert page["count"] == 55
    assert len(page["results"]) == 50
    assert ok(admin_a.get(SERVERS + "?page=2"))["results"][-1]["name"] == "s54"


# --- discovered tools ----------------------------------------------------------------------------------


def test_discovered_tools_with_their_registered_names(viewer_a, tenant_a, django_assert_max_num_queries):
    server = make_server(tenant_a, "my-db", [], tool_prefix="")
    schema = {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}
    MCPServerTool.objects.create(
        tenant=tenant_a, server=server, name="query", description="Run SQL", input_schema=schema
    )
    for i in range(60):
        MCPServerTool.objects.create(tenant=tenant_a, server=server, name=f"t{i:02d}")
    with django_assert_max_num_queries(6):
        body = ok(viewer_a.get(SERVERS + "my-db/tools/?page_size=100"))
    assert body["count"] == 61
    query = body["results"][0]
    assert query["name"] == "query"
    assert query["registered_name"] == "mcp_my_db__query"
    assert (query["description"], query["input_schema"]) == ("Run SQL", schema)
    assert query["discovered_at"]
    assert body["results"][1]["registered_name"] == "mcp_my_db__t00"
    error(viewer_a.get(SERVERS + "missing/tools/"), 404, "not_found")


# --- grants --------------------------------------------------------------------------------------------


def test_grants_change_the_agents_tool_list(admin_a, viewer_a, tenant_a, agent, live_events):
    make_server(tenant_a, "pg", ["query", "schema", "drop"])
    published = live_events(events.group_name(tenant_a.pk, "mcp"))
    assert tool_names(viewer_a) == []

    grant = ok(admin_a.put(SERVERS + "pg/grants/agents/bot/", {}, format="json"), 201)
    assert (grant["agent"], grant["enabled"], grant["tool_allow"], grant["tool_deny"]) == (
        "bot",
        True,
        None,
        [],
    )
    assert tool_names(viewer_a) == ["mcp_pg__drop", "mcp_pg__query", "mcp_pg__schema"]

    body = {"tool_allow": ["query", "drop"], "tool_deny": ["drop"], "config_overrides": {"db": "ro"}}
    grant = ok(admin_a.put(SERVERS + "pg/grants/agents/bot/", body, format="json"))
    assert grant["config_overrides"] == {"db": "ro"}
    assert (grant["resources"], grant["prompts"]) == (True, True)  # the defaults
    assert tool_names(viewer_a) == ["mcp_pg__query"]  # deny beats allow
    # The resources and prompts switches are stored as sent, and leave the tools as they are.
    grant = ok(admin_a.put(SERVERS + "pg/grants/agents/bot/", {**body, "resources": False}, format="json"))
    assert (grant["resources"], grant["prompts"]) == (False, True)
    assert tool_names(viewer_a) == ["mcp_pg__query"]
    grant = ok(admin_a.put(SERVERS + "pg/grants/agents/bot/", body, format="json"))
    assert (grant["resources"], grant["prompts"]) == (True, True)

    ok(admin_a.put(SERVERS + "pg/grants/users/u1/", {"enabled": False}, format="json"), 201)
    assert tool_names(viewer_a, user_id="u1") == []  # a disabled user grant vetoes the server
    assert tool_names(viewer_a, user_id="u2") == ["mcp_pg__query"]
    ok(admin_a.put(SERVERS + "pg/grants/users/u1/", {"tool_deny": ["query"]}, format="json"))
    assert tool_names(viewer_a, user_id="u1") == []  # a user grant narrows further

    listed = ok(admin_a.get(SERVERS + "pg/grants/"))
    assert [g["agent"] for g in listed["agent_grants"]] == ["bot"]
    assert [(g["user_id"], g["tool_deny"]) for g in listed["user_grants"]] == [("u1", ["query"])]
    assert ok(admin_a.get(SERVERS + "pg/grants/users/u1/"))["enabled"] is True
    assert [g["server"] for g in ok(admin_a.get("/api/v1/agents/bot/mcp-grants/"))] == ["pg"]

    ok(admin_a.delete(SERVERS + "pg/grants/agents/bot/"), 204)
    assert tool_names(viewer_a) == []
    error(admin_a.delete(SERVERS + "pg/grants/agents/bot/"), 404, "not_found")
    ok(admin_a.delete(SERVERS + "pg/grants/users/u1/"), 204)
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()
    assert not UserGrant.objects.for_tenant(tenant_a).exists()
    verbs = [
        "mcp.agent_grant.created",
        "mcp.agent_grant.updated",
        "mcp.agent_grant.updated",
        "mcp.agent_grant.updated",
        "mcp.user_grant.created",
        "mcp.user_grant.updated",
        "mcp.agent_grant.deleted",
        "mcp.user_grant.deleted",
    ]
    assert [e.verb for e in audit(tenant_a, "mcp.") if "grant" in e.verb] == verbs
    assert [e["type"] for e in published()] == verbs


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tool_allow": "query"}, "tool_allow"),
        ({"tool_allow": [1]}, "tool_allow"),
        ({"tool_allow": ["q"] * 1001}, "tool_allow"),
        ({"tool_deny": None}, "tool_deny"),
        ({"tool_deny": ["a\nb"]}, "tool_deny"),
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"resources": "no"}, "resources"),
        ({"prompts": None}, "prompts"),
        ({"config_overrides": []}, "config_overrides"),
        ({"config_overrides": {"x": "y" * 17000}}, "config_overrides"),
        ({"granted_by": "me"}, "granted_by"),
    ],
)
def test_invalid_grants_are_400_and_change_nothing(admin_a, tenant_a, agent, body, field):
    make_server(tenant_a, "pg", ["query"])
    before = tenant_state(tenant_a)
    for url in (SERVERS + "pg/grants/agents/bot/", SERVERS + "pg/grants/users/u1/"):
        refused = error(admin_a.put(url, body, format="json"), 400, "invalid")
        assert field in refused["details"], refused
    assert tenant_state(tenant_a) == before


def test_grants_name_existing_servers_agents_and_real_users(admin_a, tenant_a, agent):
    make_server(tenant_a, "pg", ["query"])
    before = tenant_state(tenant_a)
    error(admin_a.put(SERVERS + "pg/grants/agents/nobody/", {}, format="json"), 404, "not_found")
    error(admin_a.put(SERVERS + "nope/grants/agents/bot/", {}, format="json"), 404, "not_found")
    refused = error(admin_a.put(SERVERS + "pg/grants/users/system/", {}, format="json"), 400, "invalid")
    assert "synthetic" in refused["message"]
    refused = error(
        admin_a.put(SERVERS + "pg/grants/users/" + "u" * 300 + "/", {}, format="json"), 400, "invalid"
    )
    assert "user_id" in refused["details"]
    error(admin_a.get(SERVERS + "pg/grants/agents/bot/"), 404, "not_found")
    assert tenant_state(tenant_a) == before


def test_grant_list_is_bounded_in_queries(admin_a, tenant_a, django_assert_max_num_queries):
    server = make_server(tenant_a, "pg", ["query"])
    system = Actor.system(tenant_a)
    from apps.mcp_grants import services

    for i in range(20):
        bot = tenant_services.agent_create(actor=system, key=f"bot-{i:02d}", name="Bot")
        services.agent_grant_set(actor=system, server=server, agent=bot)
        services.user_grant_set(actor=system, server=server, user_id=f"u{i:02d}")
    # Each agent grant's effective tools take one policy resolution per agent (its documents and tool
    # universe: POLICY_QUERIES), whatever the number of tools.
    with django_assert_max_num_queries(6 + 20 * POLICY_QUERIES):
        listed = ok(admin_a.get(SERVERS + "pg/grants/"))
    assert len(listed["agent_grants"]) == len(listed["user_grants"]) == 20
    assert {tuple(g["effective_tools"]) for g in listed["agent_grants"]} == {("mcp_pg__query",)}
    for i in range(50):
        MCPServerTool.objects.create(tenant=tenant_a, server=server, name=f"t{i:02d}")
    tenant_services.agent_create(actor=system, key="bump", name="Bump")  # a new config version
    with django_assert_max_num_queries(6 + 20 * POLICY_QUERIES):
        listed = ok(admin_a.get(SERVERS + "pg/grants/"))
    assert len(listed["agent_grants"][0]["effective_tools"]) == 51


# --- per-user credentials ------------------------------------------------------------------------------


def test_credentials_are_write_only_and_audited_without_values(admin_a, tenant_a, live_events):
    make_server(tenant_a, "remote", [], transport="sse", command="", url=PUBLIC_URL)
    make_server(tenant_a, "local", [])
    published = live_events(events.group_name(tenant_a.pk, "mcp"))
    url = SERVERS + "remote/credentials/alice@a.test/"
    body = {"api_key": SECRETS[3], "headers": {"X-Token": SECRETS[0]}}
    created = ok(admin_a.put(url, body, format="json"), 201)
    assert created == {
        "id": created["id"],
        "server": "remote",
        "user_id": "alice@a.test",
        "has_api_key": True,
        "headers": ["X-Token"],
        "env": [],
        "updated_at": created["updated_at"],
    }
    # a field left out keeps its value; an empty one clears it
    updated = ok(admin_a.put(url, {"api_key": ""}, format="json"))
    assert (updated["has_api_key"], updated["headers"]) == (False, ["X-Token"])
    stored = UserCredential.objects.for_tenant(tenant_a).get(user_id="alice@a.test")
    assert (stored.api_key, stored.headers) == ("", {"X-Token": SECRETS[0]})
    ok(admin_a.put(SERVERS + "local/credentials/bob/", {"env": {"TOKEN": SECRETS[2]}}, format="json"), 201)

    listed = ok(admin_a.get(SERVERS + "remote/credentials/"))
    assert [(c["user_id"], c["headers"]) for c in listed["results"]] == [("alice@a.test", ["X-Token"])]
    ok(admin_a.delete(url), 204)
    error(admin_a.delete(url), 404, "not_found")
    assert ok(admin_a.get(SERVERS + "remote/credentials/"))["results"] == []

    verbs = [e.verb for e in audit(tenant_a, "mcp.user_credential")]
    assert verbs == [
        "mcp.user_credential.created",
        "mcp.user_credential.updated",
        "mcp.user_credential.created",
        "mcp.user_credential.deleted",
    ]
    assert audit(tenant_a, "mcp.user_credential")[1].data["changed"] == ["api_key"]
    assert [e["type"] for e in published()] == verbs
    shown = json.dumps([created, updated, listed, [e.data for e in audit(tenant_a)], published()])
    for secret in SECRETS:
        assert secret not in shown


@pytest.mark.parametrize(
    ("server", "body", "field"),
    [
        ("remote", {"env": {"TOKEN": "x"}}, "env"),
        ("local", {"env": {"TOKEN": "env:SECRET_KEY"}}, "env"),
        ("local", {"env": {"1BAD": "x"}}, "env"),
        ("remote", {"headers": {"X-A": "a\nb"}}, "headers"),
        ("remote", {"headers": {"Bad Header": "v"}}, "headers"),
        ("remote", {"headers": ["X-A"]}, "headers"),
        ("remote", {"api_key": "a\nb"}, "api_key"),
        ("remote", {"api_key": "k" * 8193}, "api_key"),
        ("remote", {"api_key": 42}, "api_key"),
        ("remote", {}, "non_field_errors"),
        ("remote", {"api_key": "", "headers": {}}, "non_field_errors"),
        ("remote", {"password": "x"}, "password"),
    ],
)
def test_invalid_credentials_are_400_and_change_nothing(admin_a, tenant_a, server, body, field):
    make_server(tenant_a, "remote", [], transport="sse", command="", url=PUBLIC_URL)
    make_server(tenant_a, "local", [])
    before = tenant_state(tenant_a)
    refused = error(admin_a.put(SERVERS + f"{server}/credentials/u1/", body, format="json"), 400, "invalid")
    assert field in refused["details"], refused
    assert tenant_state(tenant_a) == before


# --- access requests -----------------------------------------------------------------------------------


def key_actor(tenant: Tenant, role: str) -> tuple[Any, str]:
    """A client with a new API key of ``tenant`` and that key's id (the requester id)."""
    key, raw = tenant_services.api_key_create(
        actor=Actor.system(tenant), name=f"req-{role}-{key_count()}", role=role
    )
    return factories.key_client(raw), str(key.pk)


_keys = iter(range(10_000))


def key_count() -> int:
    return next(_keys)


def test_members_ask_admins_see_all_and_others_only_their_own(tenant_a, agent, admin_a, live_events):
    make_server(tenant_a, "pg", ["query", "schema"])
    alice, alice_id = key_actor(tenant_a, Role.MEMBER)
    bob, _ = key_actor(tenant_a, Role.MEMBER)
    viewer, _ = key_actor(tenant_a, Role.VIEWER)
    inbox = live_events(events.group_name(tenant_a.pk, "mcp"))

    body = {"server": "pg", "scope": "agent", "agent": "bot", "tool_allow": ["query"], "reason": "reports"}
    asked = ok(alice.post(REQUESTS, body, format="json"), 201)
    assert (asked["status"], asked["scope"], asked["agent"], asked["tool_allow"]) == (
        "pending",
        "agent",
        "bot",
        ["query"],
    )
    assert asked["requester"] == {"kind": "api_key", "id": alice_id}
    by_user = ok(
        bob.post(REQUESTS, {"server": "pg", "scope": "user", "user_id": "bob@a.test"}, format="json"), 201
    )
    assert (by_user["user_id"], by_user["agent"], by_user["tool_allow"]) == ("bob@a.test", None, None)
    error(viewer.post(REQUESTS, body, format="json"), 403, "permission_denied")

    assert [e["type"] for e in inbox()] == ["mcp.request.created", "mcp.request.created"]
    assert inbox()[0]["data"]["reason"] == "reports"

    assert [r["id"] for r in ok(alice.get(REQUESTS))["results"]] == [asked["id"]]
    assert [r["id"] for r in ok(bob.get(REQUESTS))["results"]] == [by_user["id"]]
    assert ok(viewer.get(REQUESTS))["results"] == []
    assert [r["id"] for r in ok(admin_a.get(REQUESTS))["results"]] == [by_user["id"], asked["id"]]
    assert [
        r["id"] for r in ok(admin_a.get(REQUESTS + "?scope=agent&status=pending&server=pg"))["results"]
    ] == [asked["id"]]
    assert ok(admin_a.get(REQUESTS + "?server=other"))["results"] == []
    error(admin_a.get(REQUESTS + "?status=maybe"), 400, "invalid")

    assert ok(alice.get(REQUESTS + asked["id"] + "/"))["reason"] == "reports"
    assert ok(admin_a.get(REQUESTS + asked["id"] + "/"))["id"] == asked["id"]
    error(bob.get(REQUESTS + asked["id"] + "/"), 404, "not_found")
    error(viewer.get(REQUESTS + asked["id"] + "/"), 404, "not_found")
    error(alice.post(REQUESTS + asked["id"] + "/approve", {}, format="json"), 403, "permission_denied")
    assert AccessRequest.objects.for_tenant(tenant_a).filter(status="pending").count() == 2


def test_a_logged_in_user_asks_for_themselves_by_default(tenant_a):
    from django.test import Client

    make_server(tenant_a, "pg", ["query"])
    user = factories.make_user(tenant_a, Role.MEMBER, email="carol@a.test")
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(user)
    response = browser.post(REQUESTS, {"server": "pg", "scope": "user"}, content_type="application/json")
    asked = ok(response, 201)
    assert (asked["user_id"], asked["requester"]) == ("carol@a.test", {"kind": "user", "id": str(user.pk)})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"server": "nope", "scope": "agent", "agent": "bot"}, "server"),
        ({"server": "pg", "scope": "agent", "agent": "nobody"}, "agent"),
        ({"server": "pg", "scope": "agent"}, "agent"),
        ({"server": "pg", "scope": "team", "user_id": "u1"}, "scope"),
        ({"server": "pg", "scope": "user"}, "user_id"),
        ({"server": "pg", "scope": "user", "user_id": "system"}, "user_id"),
        ({"server": "pg", "scope": "user", "user_id": "u" * 256}, "user_id"),
        ({"server": "pg", "scope": "user", "user_id": "u1", "reason": "r" * 2001}, "reason"),
        ({"server": "pg", "scope": "user", "user_id": "u1", "tool_allow": "query"}, "tool_allow"),
        ({"server": "pg", "scope": "user", "user_id": "u1", "tool_allow": ["q"] * 1001}, "tool_allow"),
        ({"server": "pg", "scope": "user", "user_id": "u1", "status": "approved"}, "status"),
        ({"server": 5, "scope": "user", "user_id": "u1"}, "server"),
    ],
)
def test_invalid_requests_are_400_and_change_nothing(member_a, tenant_a, agent, body, field):
    make_server(tenant_a, "pg", ["query"])
    before = tenant_state(tenant_a)
    refused = error(member_a.post(REQUESTS, body, format="json"), 400, "invalid")
    assert field in refused["details"], refused
    assert tenant_state(tenant_a) == before


def test_approval_may_narrow_and_the_requester_is_told(tenant_a, agent, admin_a, viewer_a, live_events):
    make_server(tenant_a, "pg", ["query", "schema", "drop"])
    alice, alice_id = key_actor(tenant_a, Role.MEMBER)
    _, bob_id = key_actor(tenant_a, Role.MEMBER)
    to_alice = live_events(events.actor_group(tenant_a.pk, "api_key", alice_id))
    to_bob = live_events(events.actor_group(tenant_a.pk, "api_key", bob_id))
    body = {"server": "pg", "scope": "agent", "agent": "bot", "tool_allow": ["query", "schema"]}
    asked = ok(alice.post(REQUESTS, body, format="json"), 201)
    approve = REQUESTS + asked["id"] + "/approve"
    before = tenant_state(tenant_a)

    refused = error(admin_a.post(approve, {"tool_allow": ["drop"]}, format="json"), 400, "invalid")
    assert "only tools the request asked for: drop" in refused["message"]
    error(admin_a.post(approve, {"tool_allow": []}, format="json"), 400, "invalid")
    error(admin_a.post(approve, {"note": "n" * 2001}, format="json"), 400, "invalid")
    error(admin_a.post(approve, {"grant": "all"}, format="json"), 400, "invalid")
    assert tenant_state(tenant_a) == before

    approved = ok(admin_a.post(approve, {"tool_allow": ["schema"], "note": "read-only first"}, format="json"))
    assert (approved["status"], approved["review_note"]) == ("approved", "read-only first")
    assert approved["reviewed_by"].startswith("key ")
    assert approved["reviewed_at"]
    assert approved["tool_allow"] == ["query", "schema"]  # what was asked stays on the request
    assert AgentGrant.objects.for_tenant(tenant_a).get().tool_allow == ["schema"]
    assert tool_names(viewer_a) == ["mcp_pg__schema"]

    [told] = to_alice()
    assert (told["topic"], told["type"], told["tenant"]) == ("me", "mcp.request.approved", tenant_a.slug)
    assert (told["data"]["id"], told["data"]["review_note"]) == (asked["id"], "read-only first")
    assert to_bob() == []

    # decided already: 409, and nothing changes
    after = tenant_state(tenant_a)
    conflict = error(
        admin_a.post(REQUESTS + asked["id"] + "/reject", {"note": "too late"}, format="json"), 409, "conflict"
    )
    assert "not pending" in conflict["message"]
    error(admin_a.post(approve, {}, format="json"), 409, "conflict")
    error(
        admin_a.post(REQUESTS + "00000000-0000-4000-8000-000000000000/approve", {}, format="json"),
        404,
        "not_found",
    )
    assert tenant_state(tenant_a) == after
    audit_approved = AuditEvent.objects.for_tenant(tenant_a).get(verb="mcp.request.approved")
    assert audit_approved.data["grant"]["tool_allow"] == ["schema"]


def test_rejection_leaves_nothing_behind(tenant_a, agent, admin_a, viewer_a, live_events):
    make_server(tenant_a, "pg", ["query"])
    alice, alice_id = key_actor(tenant_a, Role.MEMBER)
    to_alice = live_events(events.actor_group(tenant_a.pk, "api_key", alice_id))
    asked = ok(alice.post(REQUESTS, {"server": "pg", "scope": "agent", "agent": "bot"}, format="json"), 201)
    tools_before = tool_names(viewer_a)
    before = tenant_state(tenant_a)

    rejected = ok(
        admin_a.post(REQUESTS + asked["id"] + "/reject", {"note": "use the replica"}, format="json")
    )

    assert (rejected["status"], rejected["review_note"]) == ("rejected", "use the replica")
    after = tenant_state(tenant_a)
    assert not AgentGrant.objects.for_tenant(tenant_a).exists()
    assert tool_names(viewer_a) == tools_before == []
    # only the request (decided) and the audit log changed: no grant, the same configuration version
    changed = {label for label in after if after[label] != before[label]}
    assert changed == {"mcp_grants.AccessRequest", "audit.AuditEvent"}
    [told] = to_alice()
    assert (told["type"], told["data"]["status"], told["data"]["review_note"]) == (
        "mcp.request.rejected",
        "rejected",
        "use the replica",
    )


def queued_discoveries() -> list[tuple[Any, ...]]:
    from django_q.models import OrmQ

    tasks = [q.task for q in OrmQ.objects.all()]
    return [tuple(t["args"]) for t in tasks if t["func"] == "apps.mcp_grants.tasks.discover"]


def test_a_registration_and_a_changed_connection_are_discovered_after_commit(
    admin_a, tenant_a, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        created = ok(admin_a.post(SERVERS, http_body(), format="json"), 201)
    expected = (str(tenant_a.pk), created["id"])
    assert queued_discoveries() == [expected]
    with django_capture_on_commit_callbacks(execute=True):
        ok(admin_a.patch(SERVERS + "remote/", {"display_name": "Only a label"}, format="json"))
    assert queued_discoveries() == [expected]
    with django_capture_on_commit_callbacks(execute=True):
        ok(admin_a.patch(SERVERS + "remote/", {"headers": {"X-Token": "rotated"}}, format="json"))
    assert queued_discoveries() == [expected, expected]
    with django_capture_on_commit_callbacks(execute=True):
        ok(admin_a.patch(SERVERS + "remote/", {"enabled": False}, format="json"))
    assert len(queued_discoveries()) == 2  # a disabled server is not connected to


def test_request_and_credential_lists_are_paginated_and_bounded_in_queries(
    admin_a, tenant_a, agent, django_assert_max_num_queries
):
    from apps.mcp_grants import services

    server = make_server(tenant_a, "pg", ["query"])
    system = Actor.system(tenant_a)
    for i in range(60):
        services.request_create(actor=system, server=server, scope="agent", agent=agent, reason=f"r{i}")
        services.credential_set(actor=system, server=server, user_id=f"u{i:02d}", api_key=f"k{i}")
    with django_assert_max_num_queries(5):
        first = ok(admin_a.get(REQUESTS))
    assert len(first["results"]) == 50
    assert first["results"][0]["reason"] == "r59"  # newest first
    second = ok(admin_a.get(first["next"]))
    assert [r["reason"] for r in second["results"]] == [f"r{i}" for i in range(9, -1, -1)]
    assert second["next"] is None
    with django_assert_max_num_queries(5):
        credentials = ok(admin_a.get(SERVERS + "pg/credentials/?page_size=200"))
    assert credentials["count"] == 60
    assert all(c["has_api_key"] for c in credentials["results"])


def test_a_user_scoped_request_approved_narrows_that_users_tools(
    tenant_a, agent, admin_a, viewer_a, member_a
):
    from apps.mcp_grants import services

    server = make_server(tenant_a, "pg", ["query", "schema"])
    services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    body = {"server": "pg", "scope": "user", "user_id": "dana@a.test", "tool_allow": ["schema"]}
    asked = ok(member_a.post(REQUESTS, body, format="json"), 201)
    assert tool_names(viewer_a, user_id="dana@a.test") == ["mcp_pg__query", "mcp_pg__schema"]

    ok(admin_a.post(REQUESTS + asked["id"] + "/approve", {}, format="json"))

    grant = ok(admin_a.get(SERVERS + "pg/grants/users/dana@a.test/"))
    assert (grant["enabled"], grant["tool_allow"]) == (True, ["schema"])
    assert tool_names(viewer_a, user_id="dana@a.test") == ["mcp_pg__schema"]
    assert tool_names(viewer_a, user_id="erin@a.test") == ["mcp_pg__query", "mcp_pg__schema"]
