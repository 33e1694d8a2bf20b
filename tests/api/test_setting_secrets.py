"""Secret-bearing runtime settings (the web search key): write-only on the tenant and agent endpoints,
encrypted at rest, audited only as changed, given to web_search and scrubbed from every tool's output."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, SettingSecret, Tenant
from tests.api.personas import error
from tests.api.tenant_state import tenant_state
from tests.local_http import Handler, LocalServer, serving

pytestmark = pytest.mark.django_db

KEY = "BSAk3y-tenant-0123456789abcdef"
AGENT_KEY = "BSAk3y-agent-fedcba9876543210"
PUBLIC_IP = "127.0.0.2"
READERS = ["viewer_a", "member_a", "admin_a", "owner_a"]


def brave(key: str | None = KEY, **extra: Any) -> dict[str, Any]:
    return {"tools": {"web_search": {"provider": "brave", "api_key": key, **extra}}}


def set_tenant_key(client: Any, key: Any = KEY, **extra: Any) -> Any:
    return client.patch("/api/v1/tenant/", {"settings": brave(key, **extra)}, format="json")


def raw_rows(sql: str, params: list[Any]) -> str:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return json.dumps([list(map(str, row)) for row in cursor.fetchall()])


def everything_stored(tenant: Tenant) -> str:
    """The raw columns of the tenant, its agents, its setting secrets and its audit rows, as text."""
    return "".join(
        [
            raw_rows("SELECT settings::text FROM tenants_tenant WHERE id = %s", [tenant.pk]),
            raw_rows("SELECT settings::text FROM tenants_agent WHERE tenant_id = %s", [tenant.pk]),
            raw_rows("SELECT path, value FROM tenants_settingsecret WHERE tenant_id = %s", [tenant.pk]),
            raw_rows("SELECT data::text FROM audit_auditevent WHERE tenant_id = %s", [tenant.pk]),
        ]
    )


@pytest.fixture
def bot(tenant_a: Tenant) -> Agent:
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


# --- the tenant's key -------------------------------------------------------------------------------


def test_the_key_is_write_only_for_every_role(request, admin_a, tenant_a):
    response = set_tenant_key(admin_a)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["settings"] == {"tools": {"web_search": {"provider": "brave", "api_key": {"set": True}}}}
    assert body["runtime"]["tools"]["web_search"] == {"provider": "brave", "api_key": {"set": True}}
    assert KEY not in response.content.decode()
    for persona in READERS:
        shown = request.getfixturevalue(persona).get("/api/v1/tenant/")
        assert shown.status_code == 200
        assert shown.json()["settings"]["tools"]["web_search"]["api_key"] == {"set": True}, persona
        assert KEY not in shown.content.decode(), persona


def test_a_provider_without_a_key_shows_not_set(admin_a):
    body = admin_a.patch(
        "/api/v1/tenant/", {"settings": {"tools": {"web_search": {"provider": "brave"}}}}, format="json"
    ).json()
    assert body["settings"]["tools"]["web_search"] == {"provider": "brave", "api_key": {"set": False}}


def test_the_key_is_encrypted_at_rest_and_out_of_the_settings_column(admin_a, tenant_a):
    set_tenant_key(admin_a)

    assert KEY not in everything_stored(tenant_a)
    tenant_a.refresh_from_db()
    assert tenant_a.settings == {"tools": {"web_search": {"provider": "brave"}}}
    stored = SettingSecret.objects.for_tenant(tenant_a).get(agent=None)
    assert (stored.path, stored.value) == ("tools.web_search.api_key", KEY)


def test_leaving_the_key_out_or_sending_the_read_shape_keeps_it(admin_a, tenant_a):
    set_tenant_key(admin_a)

    for settings in (
        {"tools": {"web_search": {"provider": "brave", "count": 3}}},
        {"tools": {"web_search": {"provider": "brave", "api_key": {"set": True}}}},
        {"runner": "builtin"},
    ):
        body = admin_a.patch("/api/v1/tenant/", {"settings": settings}, format="json").json()
        assert body["settings"]["tools"]["web_search"]["api_key"] == {"set": True}, settings
    assert SettingSecret.objects.for_tenant(tenant_a).get().value == KEY


@pytest.mark.parametrize(
    "settings",
    [
        {"tools": {"web_search": {"provider": "brave", "api_key": None}}},
        {"tools": {"web_search": {"provider": "brave", "api_key": ""}}},
        {"tools": None},
    ],
    ids=["null", "empty", "reset-tools"],
)
def test_null_empty_or_resetting_tools_clears_the_key(admin_a, tenant_a, settings):
    set_tenant_key(admin_a)

    response = admin_a.patch("/api/v1/tenant/", {"settings": settings}, format="json")

    assert response.status_code == 200, response.content
    assert not SettingSecret.objects.for_tenant(tenant_a).exists()
    assert "{'set': True}" not in str(response.json()["settings"])
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="tenant.updated").first()
    assert event is not None
    assert event.data["changes"]["settings.tools.web_search.api_key"] == {"changed": True, "set": False}


def test_the_audit_trail_says_the_key_changed_never_what_it_is(admin_a, tenant_a):
    set_tenant_key(admin_a)
    set_tenant_key(admin_a, "BSAk3y-replaced-000111222333")
    set_tenant_key(admin_a, "BSAk3y-replaced-000111222333")  # the same key again: no change

    events = list(
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="tenant.updated").order_by("created_at")
    )
    assert len(events) == 2
    assert events[0].data["changes"]["settings.tools.web_search.api_key"] == {"changed": True, "set": True}
    assert events[1].data["changes"] == {"settings.tools.web_search.api_key": {"changed": True, "set": True}}
    listed = admin_a.get("/api/v1/audit/events/").content.decode()
    assert "settings.tools.web_search.api_key" in listed
    assert KEY not in listed
    assert "BSAk3y-replaced" not in listed
    assert "BSAk3y" not in everything_stored(tenant_a)


@pytest.mark.parametrize("persona", ["viewer_a", "member_a"])
def test_below_admin_the_key_cannot_be_set(request, tenant_a, persona):
    client = request.getfixturevalue(persona)
    before = tenant_state(tenant_a)

    response = set_tenant_key(client)

    error(response, 403, "permission_denied")
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (12345, "tools.web_search.api_key must be a string"),
        ("line\nbreak-key", "tools.web_search.api_key must not contain control characters"),
        ("k" * 1025, "tools.web_search.api_key must be at most 1024 characters"),
    ],
)
def test_an_invalid_key_is_a_400_with_nothing_changed(admin_a, tenant_a, value, fragment):
    set_tenant_key(admin_a)
    before = tenant_state(tenant_a)

    tenant_response = set_tenant_key(admin_a, value)
    agent_response = admin_a.post(
        "/api/v1/agents/", {"key": "a", "name": "A", "settings": brave(value)}, format="json"
    )

    for response in (tenant_response, agent_response):
        envelope = error(response, 400, "invalid")
        assert fragment in envelope["message"]
        assert any(fragment in message for message in envelope["details"]["settings"])
    assert tenant_state(tenant_a) == before


# --- an agent's key ---------------------------------------------------------------------------------


def test_an_agents_key_is_write_only_on_every_agent_endpoint(request, admin_a, tenant_a):
    created = admin_a.post(
        "/api/v1/agents/", {"key": "bot", "name": "Bot", "settings": brave(AGENT_KEY)}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["settings"]["tools"]["web_search"]["api_key"] == {"set": True}

    updated = admin_a.patch(
        "/api/v1/agents/bot/", {"settings": {"tools": {"web_search": {"provider": "brave"}}}}, format="json"
    )
    assert updated.json()["settings"]["tools"]["web_search"] == {
        "provider": "brave",
        "api_key": {"set": True},
    }
    for persona in READERS:
        client = request.getfixturevalue(persona)
        for url in ("/api/v1/agents/", "/api/v1/agents/bot/"):
            shown = client.get(url)
            assert shown.status_code == 200, (persona, url)
            assert AGENT_KEY not in shown.content.decode(), (persona, url)
        assert client.get("/api/v1/agents/bot/").json()["settings"]["tools"]["web_search"]["api_key"] == {
            "set": True
        }
    assert AGENT_KEY not in admin_a.get("/api/v1/audit/events/").content.decode()
    assert AGENT_KEY not in everything_stored(tenant_a)
    cleared = admin_a.patch("/api/v1/agents/bot/", {"settings": brave(None)}, format="json").json()
    assert cleared["settings"]["tools"]["web_search"]["api_key"] == {"set": False}
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="agent.updated").first()
    assert event is not None
    assert event.data["changes"]["settings.tools.web_search.api_key"] == {"changed": True, "set": False}


def test_the_agent_list_reads_the_keys_state_without_a_query_per_agent(
    admin_a, tenant_a, django_assert_max_num_queries
):
    for i in range(5):
        services.agent_create(
            actor=Actor.system(tenant_a), key=f"a{i}", name="A", settings=brave(f"{AGENT_KEY}{i}")
        )
    with django_assert_max_num_queries(4):
        body = admin_a.get("/api/v1/agents/").json()
    assert [a["settings"]["tools"]["web_search"]["api_key"] for a in body["results"]] == [{"set": True}] * 5


def test_another_tenants_agent_is_404_with_nothing_changed(outsider, admin_a, tenant_a, bot):
    before = tenant_state(tenant_a)

    response = outsider.patch("/api/v1/agents/bot/", {"settings": brave(AGENT_KEY)}, format="json")
    own = outsider.patch("/api/v1/tenant/", {"settings": brave(AGENT_KEY)}, format="json")

    error(response, 404, "not_found")
    assert own.status_code == 200  # the outsider's own tenant, not tenant A
    assert tenant_state(tenant_a) == before
    assert admin_a.get("/api/v1/tenant/").json()["settings"] == {}


# --- the key at work --------------------------------------------------------------------------------


@pytest.fixture
def brave_server(settings: Any) -> Iterator[LocalServer]:
    """A Brave-like search API on a "public" address that puts the token it got into a result."""
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:

        @server.route("/res/v1/web/search")
        def search(h: Handler) -> None:
            token = h.headers.get("X-Subscription-Token", "")
            results = [{"title": "Echo", "url": "https://echo.example/", "description": f"token {token}"}]
            h.reply(200, json.dumps({"web": {"results": results}}).encode(), "application/json")

        yield server


def execute(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": tool, "args": args}, format="json"
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def test_web_search_sends_the_tenants_key_and_never_shows_it(admin_a, member_a, bot, brave_server):
    set_tenant_key(admin_a, endpoint=brave_server.url("/res/v1/web/search"))

    body = execute(member_a, "web_search", {"query": "toolgate"})

    assert body["is_error"] is False, body
    assert [hit.headers["x-subscription-token"] for hit in brave_server.hits] == [KEY]
    assert "Echo" in body["for_llm"]
    assert KEY not in json.dumps(body)
    assert "[REDACTED]" in body["for_llm"]


def test_an_agents_own_key_replaces_the_tenants(admin_a, member_a, bot, brave_server):
    set_tenant_key(admin_a, endpoint=brave_server.url("/res/v1/web/search"))
    admin_a.patch(
        "/api/v1/agents/bot/", {"settings": {"tools": {"web_search": {"api_key": AGENT_KEY}}}}, format="json"
    )

    body = execute(member_a, "web_search", {"query": "toolgate"})

    assert [hit.headers["x-subscription-token"] for hit in brave_server.hits] == [AGENT_KEY]
    assert AGENT_KEY not in json.dumps(body)


def test_a_cleared_key_is_no_longer_used(admin_a, member_a, bot, brave_server):
    set_tenant_key(admin_a, endpoint=brave_server.url("/res/v1/web/search"))
    set_tenant_key(admin_a, None, endpoint=brave_server.url("/res/v1/web/search"))

    body = execute(member_a, "web_search", {"query": "toolgate"})

    assert body["is_error"] is True
    assert body["for_llm"].startswith("web_search uses Brave but has no api_key.")
    assert brave_server.hits == []


def test_exec_never_prints_the_tenants_or_the_agents_key(admin_a, member_a, bot, tenant_a):
    set_tenant_key(admin_a)
    admin_a.patch("/api/v1/agents/bot/", {"settings": brave(AGENT_KEY)}, format="json")

    body = execute(member_a, "exec", {"command": f"echo {KEY} {AGENT_KEY}"})

    shown = json.dumps(body)
    assert KEY not in shown
    assert AGENT_KEY not in shown
    if not body["is_error"]:  # (a host without a usable sandbox refuses the command: nothing to show)
        assert body["for_llm"].startswith("[REDACTED] [REDACTED]")
    recorded = raw_rows("SELECT args::text, error FROM audit_toolcall WHERE tenant_id = %s", [tenant_a.pk])
    assert KEY not in recorded
    assert AGENT_KEY not in recorded


# --- the move out of the settings column --------------------------------------------------------------


def test_the_migration_moves_plain_keys_out_of_the_settings(tenant_a, bot):
    Tenant.objects.filter(pk=tenant_a.pk).update(settings=brave(KEY))
    Agent.objects.for_tenant(tenant_a).filter(pk=bot.pk).update(settings=brave(AGENT_KEY, count=3))
    migration = importlib.import_module("apps.tenants.migrations.0008_setting_secret")
    state = MigrationExecutor(connection).loader.project_state(("tenants", "0008_setting_secret"))
    version = Tenant.objects.get(pk=tenant_a.pk).config_version

    migration.move_secrets(state.apps, None)

    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert tenant.settings == {"tools": {"web_search": {"provider": "brave"}}}
    assert tenant.config_version == version + 1
    bot.refresh_from_db()
    assert bot.settings == {"tools": {"web_search": {"provider": "brave", "count": 3}}}
    secrets = {(s.agent_id, s.path): s.value for s in SettingSecret.objects.for_tenant(tenant_a)}
    assert secrets == {
        (None, "tools.web_search.api_key"): KEY,
        (bot.pk, "tools.web_search.api_key"): AGENT_KEY,
    }
    assert KEY not in everything_stored(tenant_a)
    assert AGENT_KEY not in everything_stored(tenant_a)


def test_deleting_an_agent_deletes_its_key(admin_a, tenant_a):
    admin_a.post(
        "/api/v1/agents/", {"key": "bot", "name": "Bot", "settings": brave(AGENT_KEY)}, format="json"
    )

    response = admin_a.delete("/api/v1/agents/bot/")

    assert response.status_code == 204
    assert not SettingSecret.objects.for_tenant(tenant_a).exists()
    deleted = AuditEvent.objects.for_tenant(tenant_a).get(verb="agent.deleted")
    assert deleted.data["settings"]["tools"]["web_search"]["api_key"] == {"set": True}
