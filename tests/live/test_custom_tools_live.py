"""Custom tools across real processes: a tool defined, changed, overridden, disabled and deleted through
this process's API is what the next call served by daphne (another process, with its own caches) runs;
the changes arrive live on daphne's ``custom_tools`` topic for administrators only."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.custom_tools.support import SECRET, TOOLS, ok
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

GREET = {
    "name": "greet",
    "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
    "command": "echo hello {{.who}}",
}


def test_a_change_through_the_api_is_used_by_the_next_call_in_another_process(tenant_a, live, daphne):
    system = Actor.system(tenant_a)
    tenant_services.agent_create(actor=system, key="bot", name="Bot")
    admin = factories.key_client(factories.make_api_key(tenant_a, Role.ADMIN))
    key = factories.make_api_key(tenant_a, Role.MEMBER)
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:

        def call(args: dict | None = None) -> dict:
            response = api.post(
                "/api/v1/runtime/execute",
                json={"agent": "bot", "tool": "greet", "args": args or {"who": "ann"}},
            )
            assert response.status_code == 200, response.text
            return response.json()

        def listed() -> dict:
            tools = api.get("/api/v1/agents/bot/tools", params={"format": "mcp"}).json()["tools"]
            return {t["name"]: t for t in tools}

        assert "greet" not in listed()
        assert call()["for_llm"].startswith("unknown tool: greet.")

        created = ok(admin.post(TOOLS, GREET, format="json"), 201)
        assert call()["for_llm"] == "hello ann"  # daphne has served the tenant before: no stale cache
        assert listed()["greet"]["inputSchema"] == GREET["parameters"]

        ok(
            admin.patch(
                f"{TOOLS}{created['id']}/",
                {"command": 'echo bye {{.who}} "$TOKEN"', "env": {"TOKEN": SECRET}},
                format="json",
            )
        )
        changed = call()
        assert changed["for_llm"] == "bye ann [REDACTED]"
        assert SECRET not in str(changed)

        ok(admin.post(TOOLS, {**GREET, "command": "echo own {{.who}}", "agent": "bot"}, format="json"), 201)
        assert call()["for_llm"] == "own ann"

        ok(
            admin.patch(
                f"{TOOLS}{created['id']}/",
                {"parameters": {"type": "object"}, "command": "echo x"},
                format="json",
            )
        )
        assert call()["for_llm"] == "own ann"  # the agent's own still overrides

        own = ok(admin.get(TOOLS + "?agent=bot"))["results"][0]
        ok(admin.patch(f"{TOOLS}{own['id']}/", {"enabled": False}, format="json"))
        assert call({})["for_llm"] == "x"  # back to the global one, with its new (empty) schema

        ok(admin.delete(f"{TOOLS}{created['id']}/"), 204)
        assert call()["for_llm"].startswith("unknown tool: greet.")
        assert "greet" not in listed()


def test_changes_are_published_live_to_administrators(
    tenant_a, live: LiveProcesses, daphne, sockets: contextlib.ExitStack
):
    admin_key = factories.make_api_key(tenant_a, Role.ADMIN)
    admin = sockets.enter_context(open_socket(live.ws_url, api_key=admin_key))
    assert "custom_tools" in admin.recv()["topics"]
    assert admin.subscribe(["custom_tools"])["topics"] == ["custom_tools"]
    member = sockets.enter_context(
        open_socket(live.ws_url, api_key=factories.make_api_key(tenant_a, Role.MEMBER))
    )
    assert "custom_tools" not in member.recv()["topics"]
    reply = member.request({"type": "subscribe", "topics": ["custom_tools"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")

    client = factories.key_client(admin_key)
    created = ok(client.post(TOOLS, {**GREET, "env": {"TOKEN": SECRET}}, format="json"), 201)

    event = admin.wait_for(lambda m: event_of(m, topic="custom_tools", type="custom_tool.created"))["event"]
    assert event["tenant"] == tenant_a.slug
    assert (event["data"]["id"], event["data"]["env"]) == (created["id"], ["TOKEN"])
    assert SECRET not in str(event)
