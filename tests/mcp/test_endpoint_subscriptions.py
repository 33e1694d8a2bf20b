"""Resource subscriptions through ``/mcp/<agent>/`` on a real daphne, to a real SDK server over stdio
(``tests/mcp/servers/watched.py``): ``resources/subscribe`` passed to the server that offers the URI,
its ``notifications/resources/updated`` streamed on ``GET /mcp/<agent>/`` to the keys that subscribed
and to no other, ``resources/unsubscribe`` ending it (and the server's own subscription with the last
subscriber); members and up; nothing across tenants or past the grant's resources switch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPError

from apps.accounts import services
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer, MCPServerTool, ResourceSubscription
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import endpoint, rest, session

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
    # resources/subscribe is the handshake versions' way, deprecated (not gone) in 2026-07-28's SDK API
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

WATCHED = Path(__file__).resolve().parent / "servers" / "watched.py"


@pytest.fixture
def watched(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="watched",
        transport="stdio",
        command=sys.executable,
        args=[str(WATCHED)],
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    # The tools as discovery stores them (discovery runs in a worker, which these tests do not start).
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    for name in ("touch", "watching"):
        MCPServerTool.objects.create(tenant=tenant_a, server=server, name=name, input_schema=schema)
    return server


@contextlib.contextmanager
def updates(url: str, key: str, *, lists: bool = False) -> Iterator[queue.Queue[dict[str, Any]]]:
    """The key's update stream (``GET`` with an SSE Accept), its messages put on a queue by a thread;
    the ``list_changed`` ones only with ``lists`` (discovery, on first connecting, may send some)."""
    found: queue.Queue[dict[str, Any]] = queue.Queue()
    opened = threading.Event()
    client = httpx.Client(timeout=httpx.Timeout(30, read=None))

    def read() -> None:
        headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {key}"}
        with contextlib.suppress(httpx.HTTPError), client.stream("GET", url, headers=headers) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                opened.set()
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if lists or not message["method"].endswith("/list_changed"):
                        found.put(message)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert opened.wait(30), "the update stream did not open"
    try:
        yield found
    finally:
        client.close()
        thread.join(10)


def subscribe(url: str, key: str, uri: str, *, unsubscribe: bool = False) -> types.EmptyResult | MCPError:
    async def go() -> types.EmptyResult | MCPError:
        async with session(url, key) as client:
            try:
                if unsubscribe:
                    return await client.unsubscribe_resource(uri)
                return await client.subscribe_resource(uri)
            except MCPError as error:
                return error

    return asyncio.run(go())


def touch(base: str, key: str, uri: str) -> str:
    with rest(base, key) as http:
        body = http.post(
            "/api/v1/runtime/execute",
            json={"agent": "bot", "tool": "mcp_watched__touch", "args": {"uri": uri}},
        ).json()
    return str(body["for_llm"])


def watching(base: str, key: str) -> str:
    with rest(base, key) as http:
        body = http.post(
            "/api/v1/runtime/execute", json={"agent": "bot", "tool": "mcp_watched__watching", "args": {}}
        ).json()
    return str(body["for_llm"])


async def next_of(stream: Any, kind: str) -> Any:
    """The stream's next event of ``kind`` (list changes may come first: discovery sends some when the
    server is first connected)."""
    while True:
        event = await stream.__anext__()
        if type(event).__name__ == kind:
            return event


def change_policy(base: str, admin: str) -> None:
    with rest(base, admin) as http:
        response = http.put("/api/v1/policy/tenant/", json={"document": {"deny": ["web_fetch"]}})
    assert response.status_code == 200, response.text


def quiet(found: queue.Queue[dict[str, Any]], seconds: float = 1.5) -> bool:
    time.sleep(seconds)
    return found.empty()


def test_updates_reach_the_keys_that_subscribed_until_they_unsubscribe(base, tenant_a, watched):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    other = factories.make_api_key(tenant_a, Role.MEMBER)
    url = endpoint(base)
    with updates(url, member) as mine, updates(url, other) as theirs:
        assert isinstance(subscribe(url, member, "watch://a"), types.EmptyResult)
        assert isinstance(subscribe(url, member, "watch://a"), types.EmptyResult)  # again: no change
        assert ResourceSubscription.objects.for_tenant(tenant_a).count() == 1
        assert watching(base, member) == "watch://a"

        assert touch(base, member, "watch://a") == "watch://a is now 1"
        update = mine.get(timeout=30)
        assert update == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "watch://a"},
        }
        touch(base, member, "watch://b")  # not subscribed: the server says nothing
        assert quiet(mine)
        assert theirs.empty()  # the other key subscribed to nothing

        # Both keys on one URI: each hears it; the server keeps watching until the last one leaves.
        assert isinstance(subscribe(url, other, "watch://a"), types.EmptyResult)
        touch(base, member, "watch://a")
        assert mine.get(timeout=30)["params"] == {"uri": "watch://a"}
        assert theirs.get(timeout=30)["params"] == {"uri": "watch://a"}
        assert isinstance(subscribe(url, member, "watch://a", unsubscribe=True), types.EmptyResult)
        assert watching(base, member) == "watch://a"
        touch(base, member, "watch://a")
        assert theirs.get(timeout=30)["params"] == {"uri": "watch://a"}
        assert quiet(mine)
        assert isinstance(subscribe(url, other, "watch://a", unsubscribe=True), types.EmptyResult)
        assert watching(base, member) == ""
        assert not ResourceSubscription.objects.for_tenant(tenant_a).exists()

    again = subscribe(url, member, "watch://a", unsubscribe=True)
    assert isinstance(again, MCPError)
    assert again.error.data["code"] == "not_found"


def test_who_may_subscribe_to_what(base, tenant_a, tenant_b, watched):
    url = endpoint(base)
    viewer = factories.make_api_key(tenant_a, Role.VIEWER)
    denied = subscribe(url, viewer, "watch://a")
    assert isinstance(denied, MCPError)
    assert denied.error.data["code"] == "permission_denied"

    missing = subscribe(url, factories.make_api_key(tenant_a, Role.MEMBER), "watch://nowhere")
    assert isinstance(missing, MCPError)
    assert missing.error.data["code"] == "not_found"

    admin = factories.make_api_key(tenant_a, Role.ADMIN)
    with rest(base, admin) as http:
        response = http.put("/api/v1/mcp/servers/watched/grants/agents/bot/", json={"resources": False})
    assert response.status_code == 200, response.text
    switched_off = subscribe(url, admin, "watch://a")
    assert isinstance(switched_off, MCPError)
    assert switched_off.error.data["code"] == "not_found"

    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    outsider = subscribe(url, factories.make_api_key(tenant_b, Role.OWNER), "watch://a")
    assert isinstance(outsider, MCPError)
    assert outsider.error.data["code"] == "not_found"
    assert not ResourceSubscription.objects.for_tenant(tenant_a).exists()
    assert not ResourceSubscription.objects.for_tenant(tenant_b).exists()


def test_a_2026_client_listens_for_the_updates_of_the_resources_it_names(base, tenant_a, watched):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    url = endpoint(base)

    async def go() -> tuple[Any, list[str], list[Any]]:
        async with (
            session(url, member, modern=True) as client,
            listen(client, resource_subscriptions=["watch://a"], tools_list_changed=True) as stream,
        ):
            honored = (stream.honored.resource_subscriptions, stream.honored.tools_list_changed)
            seen = [await asyncio.to_thread(watching, base, member)]
            await asyncio.to_thread(touch, base, member, "watch://b")  # not named: not delivered
            await asyncio.to_thread(touch, base, member, "watch://a")
            updated = await asyncio.wait_for(next_of(stream, "ResourceUpdated"), 30)
            await asyncio.to_thread(change_policy, base, admin)
            changed = await asyncio.wait_for(next_of(stream, "ToolsListChanged"), 30)
        return honored, seen, [type(updated).__name__, getattr(updated, "uri", ""), type(changed).__name__]

    admin = factories.make_api_key(tenant_a, Role.ADMIN)
    honored, seen, events = asyncio.run(go())
    assert honored == (["watch://a"], True)
    assert seen == ["watch://a"]
    assert events == ["ResourceUpdated", "watch://a", "ToolsListChanged"]
    # The stream's end ends what it subscribed (the server stops watching with its last subscriber).
    deadline = time.monotonic() + 30
    while ResourceSubscription.objects.for_tenant(tenant_a).exists():
        assert time.monotonic() < deadline, "the stream's subscription outlived it"
        time.sleep(0.2)
    assert watching(base, member) == ""

    viewer = factories.make_api_key(tenant_a, Role.VIEWER)

    async def refused() -> MCPError | None:
        async with session(url, viewer, modern=True) as client:
            try:
                async with listen(client, resource_subscriptions=["watch://a"]):
                    return None
            except MCPError as error:
                return error

    denied = asyncio.run(refused())
    assert isinstance(denied, MCPError)
    assert denied.error.data["code"] == "permission_denied"


def test_the_update_stream_hears_when_the_tenants_tools_may_have_changed(base, tenant_a, tenant_b, watched):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    admin = factories.make_api_key(tenant_a, Role.ADMIN)
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    outsider = factories.make_api_key(tenant_b, Role.OWNER)
    url = endpoint(base)
    with updates(url, member, lists=True) as mine, updates(url, outsider, lists=True) as theirs:
        change_policy(base, admin)
        methods = [mine.get(timeout=30)["method"] for _ in range(3)]
        assert methods == [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
        ]
        assert quiet(theirs)
