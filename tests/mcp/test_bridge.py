"""MCP tools through the runtime pipeline, against real MCP servers made with the SDK (stdio, SSE,
streamable HTTP): discovery, prefixed names, results, session reuse, per-tenant state, grants at call
time, a killed server reported and reconnected, a hung call timing out, per-user credentials."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django.db import connections
from django.utils import timezone

from apps.accounts import services as tenant_services
from apps.audit.models import ToolCall
from apps.mcp_grants import client, services
from apps.mcp_grants.models import MCPServer, MCPServerTool, UserCredential
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.live_servers import ALLOW_NETS, DEMO_TOOLS, http_server, kill_stdio_servers, stdio_fields

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

HANGING = Path(__file__).resolve().parent / "servers" / "hanging.py"
LINGERING = Path(__file__).resolve().parent / "servers" / "lingering.py"
TOOLS = DEMO_TOOLS


def register(tenant, name="demo", agent_key="bot", **fields):
    """A server of ``tenant`` granted to its agent ``agent_key``, with its tools discovered."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=agent_key, name=agent_key.title())
    fields = {**stdio_fields(), **fields}
    server = services.server_create(actor=system, name=name, **fields)
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    return server, agent


def call(api, tool, args=None, agent="bot", **context):
    response = api.post(
        "/api/v1/runtime/execute",
        {"agent": agent, "tool": tool, "args": args or {}, "context": context},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def listed(api, agent="bot", **params):
    response = api.get(f"/api/v1/agents/{agent}/tools", {"format": "mcp", **params})
    assert response.status_code == 200, response.content
    return {t["name"]: t for t in response.json()["tools"]}


def test_discovery_prefix_listing_and_a_call(tenant_a, member_a):
    server, _ = register(tenant_a, tool_prefix="")
    rows = MCPServerTool.objects.for_tenant(tenant_a).filter(server=server)
    stored = set(rows.values_list("name", flat=True))
    assert stored == TOOLS
    tools = listed(member_a)
    assert {n for n in tools if n.startswith("mcp_")} == {f"mcp_demo__{t}" for t in TOOLS}
    echo = tools["mcp_demo__echo"]
    assert echo["description"] == "Echo the text back."
    assert echo["inputSchema"]["required"] == ["text"]

    body = call(member_a, "mcp_demo__echo", {"text": "hello over stdio"})
    assert body == {**body, "for_llm": "hello over stdio", "is_error": False}
    record = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert (record.resolved_tool, record.decision, record.status) == ("mcp_demo__echo", "allowed", "ok")
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == MCPServer.Status.CONNECTED


def test_tool_prefix_is_used(tenant_a, member_a):
    register(tenant_a, name="dm", tool_prefix="tools")
    assert "mcp_tools__echo" in listed(member_a)
    assert call(member_a, "mcp_tools__echo", {"text": "x"})["for_llm"] == "x"


def test_results_map_faithfully(tenant_a, member_a):
    register(tenant_a)
    added = call(member_a, "mcp_demo__add", {"a": 2, "b": 3})
    assert added["structured_content"] == {"total": 5, "terms": [2, 3]}
    assert '"total": 5' in added["for_llm"]
    assert not added["is_error"]

    failed = call(member_a, "mcp_demo__fail", {"message": "the disk is on fire"})
    assert failed["is_error"]
    assert "the disk is on fire" in failed["for_llm"]

    image = call(member_a, "mcp_demo__pixel")
    assert image["content"][0]["type"] == "image"
    assert image["content"][0]["mime_type"] == "image/png"
    assert image["content"][0]["data"].startswith("iVBOR")
    assert "[image: image/png" in image["for_llm"]

    # empty optional arguments are left out; required ones are checked against the server's schema
    assert call(member_a, "mcp_demo__options", {"required": "r", "note": "", "flag": None})["for_llm"] == (
        "r; sent: none"
    )
    bad = call(member_a, "mcp_demo__add", {"a": "two", "b": 3})
    assert bad["is_error"]
    assert bad["for_llm"].startswith("Invalid arguments for mcp_demo__add: a:")
    empty = call(member_a, "mcp_demo__echo")
    assert empty["is_error"]
    assert "empty arguments (required: text)" in empty["for_llm"]


def test_every_kind_of_content_is_kept_in_order_and_its_text_scrubbed(tenant_a, member_a):
    register(tenant_a, env={"TOKEN": "server-token-1234"})
    kinds = call(member_a, "mcp_demo__kinds", {"env_name": "TOKEN"})
    assert not kinds["is_error"]
    blocks = kinds["content"]
    assert [b["type"] for b in blocks] == ["text", "audio", "resource", "resource", "resource_link"]
    assert blocks[0] == {"type": "text", "text": "one of each kind"}
    assert blocks[1]["mime_type"] == "audio/wav"
    assert blocks[1]["data"].startswith("UklGR")
    assert blocks[2] == {
        "type": "resource",
        "uri": "demo://notes",
        "mime_type": "text/plain",
        "text": "notes: [REDACTED]",
    }
    assert blocks[3]["blob"].startswith("iVBOR")
    assert blocks[3]["mime_type"] == "image/png"
    assert blocks[4] == {
        "type": "resource_link",
        "uri": "demo://later",
        "name": "later",
        "description": "read it later",
        "mime_type": "text/plain",
    }
    assert "server-token-1234" not in str(kinds)
    assert "notes: [REDACTED]" in kinds["for_llm"]
    assert "[resource link demo://later: later]" in kinds["for_llm"]


def test_one_session_is_reused_across_calls(tenant_a, member_a):
    register(tenant_a)
    pids = {call(member_a, "mcp_demo__pid")["for_llm"] for _ in range(10)}
    counts = [call(member_a, "mcp_demo__counter")["for_llm"] for _ in range(5)]
    assert len(pids) == 1
    assert counts == ["1", "2", "3", "4", "5"]  # one server process kept its state across the calls


def test_a_stateful_server_keeps_separate_state_per_tenant(tenant_a, tenant_b, member_a, outsider):
    register(tenant_a)
    register(tenant_b)
    assert [call(member_a, "mcp_demo__counter")["for_llm"] for _ in range(3)] == ["1", "2", "3"]
    assert call(outsider, "mcp_demo__counter")["for_llm"] == "1"
    assert call(member_a, "mcp_demo__pid")["for_llm"] != call(outsider, "mcp_demo__pid")["for_llm"]


def test_grants_decide_at_call_time(tenant_a, member_a):
    server, agent = register(tenant_a)
    system = Actor.system(tenant_a)
    services.agent_grant_set(actor=system, server=server, agent=agent, tool_deny=["fail"])
    assert "mcp_demo__fail" not in listed(member_a)
    refused = call(member_a, "mcp_demo__fail", {"message": "x"})
    assert refused["is_error"]
    assert refused["for_llm"] == (
        "tool not allowed by policy: mcp_demo__fail: the grant for MCP server 'demo' leaves out the tool "
        "'fail'."
    )

    # a user grant narrows for that user only; a disabled one vetoes the whole server for them
    services.user_grant_set(actor=system, server=server, user_id="alice", tool_allow=["echo"])
    assert {n for n in listed(member_a, user_id="alice") if n.startswith("mcp_")} == {"mcp_demo__echo"}
    refused = call(member_a, "mcp_demo__pid", user_id="alice")
    assert refused["is_error"]
    assert refused["for_llm"].startswith(
        "tool not allowed by policy: mcp_demo__pid: the grant of user 'alice' for MCP server 'demo' does "
        "not include the tool 'pid'. A member can request access with POST /api/v1/mcp/requests/ "
    )
    assert not call(member_a, "mcp_demo__pid", user_id="bob")["is_error"]
    services.user_grant_set(actor=system, server=server, user_id="alice", enabled=False)
    assert not [n for n in listed(member_a, user_id="alice") if n.startswith("mcp_")]
    assert call(member_a, "mcp_demo__echo", {"text": "x"}, user_id="alice")["is_error"]

    grant = services.agent_grant_set(actor=system, server=server, agent=agent)
    services.grant_delete(actor=system, grant=grant)
    # no grant at all: not "unknown", but not granted, and how to ask for it
    refused = call(member_a, "mcp_demo__echo", {"text": "x"})
    assert refused["is_error"]
    assert refused["for_llm"] == (
        "tool not allowed by policy: mcp_demo__echo: agent 'bot' has no grant for MCP server 'demo'. A "
        'member can request access with POST /api/v1/mcp/requests/ {"server": "demo", "scope": "agent", '
        '"agent": "bot", "tool_allow": ["echo"], "reason": "..."}.'
    )
    assert call(member_a, "mcp_demo__nosuchtool", {})["for_llm"].startswith("unknown tool")


def test_a_killed_server_is_reported_then_reconnected(tenant_a, member_a):
    server, _ = register(tenant_a)
    pid = call(member_a, "mcp_demo__pid")["for_llm"]
    assert kill_stdio_servers() >= 1  # ours, and any server an earlier test left dying
    started = time.monotonic()
    failed = call(member_a, "mcp_demo__pid")
    assert failed["is_error"]
    assert "demo" in failed["for_llm"]
    assert time.monotonic() - started < server.timeout_sec
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == MCPServer.Status.DISCONNECTED

    # Reconnected: a call works again within the backoff (the status row may also be written by another
    # process's health check, so the call itself is the proof).
    deadline = time.monotonic() + 30
    while (again := call(member_a, "mcp_demo__pid"))["is_error"]:
        assert time.monotonic() < deadline, again["for_llm"]
        assert "reconnecting" in again["for_llm"] or "disconnected" in again["for_llm"], again["for_llm"]
        time.sleep(0.5)
    assert again["for_llm"] != pid
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == MCPServer.Status.CONNECTED


def test_a_stdio_server_that_dies_is_reported_at_once_then_reconnected(tenant_a, member_a):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "mcp"), channel)
    server, _ = register(tenant_a)  # health checks every 30 s: none runs during this test
    pid = call(member_a, "mcp_demo__pid")["for_llm"]
    assert MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk).status == MCPServer.Status.CONNECTED

    assert kill_stdio_servers() >= 1  # ours, and any server an earlier test left dying
    started = time.monotonic()
    while (row := MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk)).status != "disconnected":
        assert time.monotonic() - started < 2, row.last_health
        time.sleep(0.05)
    assert "exited" in row.last_health["error"]
    rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
    told = [events.public(layer.deserialize(bytes(r))["event"]) for r in rows]
    assert any(e["type"] == "mcp.server.status" and e["data"]["status"] == "disconnected" for e in told), told

    # Reconnected in the background (a new server process), as after any lost connection.
    deadline = time.monotonic() + 30
    while (again := call(member_a, "mcp_demo__pid"))["is_error"]:
        assert time.monotonic() < deadline, again["for_llm"]
        time.sleep(0.5)
    assert again["for_llm"] != pid


def test_a_hung_call_times_out_and_the_connection_stays_usable(tenant_a, member_a):
    register(tenant_a, timeout_sec=2)
    started = time.monotonic()
    hung = call(member_a, "mcp_demo__sleep", {"seconds": 60})
    assert time.monotonic() - started < 6
    assert hung["is_error"]
    assert "timed out after 2s" in hung["for_llm"]
    assert call(member_a, "mcp_demo__echo", {"text": "still here"})["for_llm"] == "still here"


def test_a_hung_server_bounds_its_calls_and_leaves_other_servers_and_sessions_alone(
    tenant_a, member_a, settings
):
    """A server whose whole process hangs (stopped: it answers nothing, not even pings): each call to it
    ends at its timeout with a clear error, while calls to another server, and to the same server over
    a user's own session (another process), answer as usual meanwhile, and the other server's health
    checks go on at their pace."""
    settings.TOOLGATE_MCP_HEALTH_SECONDS = 0.5
    demo, agent = register(tenant_a)
    system = Actor.system(tenant_a)
    hanging = services.server_create(
        actor=system,
        name="hung",
        transport="stdio",
        command=sys.executable,
        args=[str(HANGING)],
        timeout_sec=2,
    )
    services.agent_grant_set(actor=system, server=hanging, agent=agent)
    client.refresh(hanging)
    UserCredential.objects.create(
        tenant=tenant_a, server=hanging, user_id="alice", env_encrypted='{"TOKEN": "alice-token-abcdefgh"}'
    )
    assert call(member_a, "mcp_hung__echo", {"text": "before"})["for_llm"] == "before"
    # The user's own session (a process of its own) is opened first, with time to spare on a busy
    # machine: a call's connecting counts against the server's 2 s timeout.
    mgr = client.manager()
    own = client.endpoint_for(hanging, client.credential_for(hanging, "alice"))
    mgr.run(mgr.session(own, time.monotonic() + 30), 40)
    assert call(member_a, "mcp_hung__echo", {"text": "own"}, user_id="alice")["for_llm"] == "own"
    other_client = factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))

    def timed(api, tool, args=None, **context):  # type: ignore[no-untyped-def]
        started = time.monotonic()
        return call(api, tool, args, **context), time.monotonic() - started

    def in_thread(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return timed(*args, **kwargs)
        finally:
            connections.close_all()

    def checked_ago() -> float:
        health = MCPServer.objects.for_tenant(tenant_a).get(pk=demo.pk).last_health
        return (timezone.now() - datetime.fromisoformat(health["checked_at"])).total_seconds()

    with ThreadPoolExecutor(2) as pool:
        frozen = pool.submit(in_thread, other_client, "mcp_hung__freeze")
        time.sleep(0.5)  # the freeze is under way
        hung_again = pool.submit(
            in_thread,
            factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER)),
            "mcp_hung__echo",
            {"text": "x"},
        )
        answered = 0
        while not (frozen.done() and hung_again.done()):
            result, took = timed(member_a, "mcp_demo__echo", {"text": "fine"})
            assert (result["for_llm"], result["is_error"]) == ("fine", False)
            assert took < 1.5, took
            result, took = timed(member_a, "mcp_hung__echo", {"text": "mine"}, user_id="alice")
            assert (result["for_llm"], result["is_error"]) == ("mine", False)
            assert took < 1.5, took
            answered += 1
        for future in (frozen, hung_again):
            result, took = future.result()
            assert result["is_error"], result
            assert "timed out after 2s" in result["for_llm"], result["for_llm"]
            assert "'hung'" in result["for_llm"]
            assert took < 2 + 3, took
    assert answered >= 2
    # the hung server's pings time out (PING_TIMEOUT) meanwhile; the other server's checks go on
    watch_until = time.monotonic() + client.PING_TIMEOUT + 1
    while time.monotonic() < watch_until:
        assert checked_ago() < 4, checked_ago()
        time.sleep(0.2)
    # still bounded afterwards; the other server and the user's session still answer
    result, took = timed(member_a, "mcp_hung__echo", {"text": "x"})
    assert result["is_error"], result
    assert took < 2 + 3, took
    assert call(member_a, "mcp_demo__echo", {"text": "fine"})["for_llm"] == "fine"
    assert call(member_a, "mcp_hung__echo", {"text": "mine"}, user_id="alice")["for_llm"] == "mine"


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
def test_http_transports(tenant_a, member_a, settings, transport):
    settings.TOOLGATE_SSRF_ALLOW_NETS = ALLOW_NETS
    with http_server(transport) as url:
        register(tenant_a, transport=transport, command="", args=[], url=url, headers={"X-Team": "blue"})
        assert {n for n in listed(member_a) if n.startswith("mcp_")} == {f"mcp_demo__{t}" for t in TOOLS}
        assert call(member_a, "mcp_demo__echo", {"text": transport})["for_llm"] == transport
        pids = {call(member_a, "mcp_demo__pid")["for_llm"] for _ in range(3)}
        counts = [call(member_a, "mcp_demo__counter")["for_llm"] for _ in range(3)]
        assert len(pids) == 1
        assert counts[-1] == str(int(counts[0]) + 2)
        # one HTTP connection carries the calls (a streamable-HTTP answer's event stream is read to its
        # end, so its connection is kept), not a new one per call
        peers = {call(member_a, "mcp_demo__peer")["for_llm"] for _ in range(5)}
        assert len(peers) == 1, peers
        assert peers.pop().startswith("127.0.0.")

        # the SSRF guard is applied again when connecting, not only at registration
        settings.TOOLGATE_SSRF_ALLOW_NETS = ""
        mgr = client.manager()
        mgr.run(mgr.close_all(), 30)
        blocked = call(member_a, "mcp_demo__echo", {"text": "x"})
        assert blocked["is_error"]
        assert "blocked" in blocked["for_llm"]


def test_a_server_that_keeps_its_answer_streams_open_is_answered_and_holds_no_connections(
    tenant_a, member_a, settings
):
    """A streamable-HTTP server that never ends an answer's event stream: each call is answered at
    once, and the streams are given up shortly after (the rest of a stream is read only briefly)."""
    settings.TOOLGATE_SSRF_ALLOW_NETS = ALLOW_NETS
    with http_server("streamable-http", script=LINGERING) as url:
        register(tenant_a, name="lingering", transport="streamable-http", command="", args=[], url=url)
        started = time.monotonic()
        assert [call(member_a, "mcp_lingering__echo", {"text": str(i)})["for_llm"] for i in range(5)] == [
            "0",
            "1",
            "2",
            "3",
            "4",
        ]
        assert time.monotonic() - started < 5
        time.sleep(0.5)
        # the five answers' connections are closed: open now are this call's and at most one idle one
        assert int(call(member_a, "mcp_lingering__connections")["for_llm"]) <= 2


def test_per_user_credentials_get_their_own_connection_and_are_scrubbed(tenant_a, member_a):
    server, _ = register(tenant_a, env={"TOKEN": "server-token-1234"})
    UserCredential.objects.create(
        tenant=tenant_a, server=server, user_id="alice", env_encrypted='{"TOKEN": "alice-token-abcdefgh"}'
    )
    assert call(member_a, "mcp_demo__env_length", {"name": "TOKEN"}, user_id="bob")["for_llm"] == "17"
    assert call(member_a, "mcp_demo__env_length", {"name": "TOKEN"}, user_id="alice")["for_llm"] == "20"
    assert (
        call(member_a, "mcp_demo__pid", user_id="alice")["for_llm"]
        != call(member_a, "mcp_demo__pid", user_id="bob")["for_llm"]
    )
    # the values never come back: the server's and the user's secrets are scrubbed from the output
    assert call(member_a, "mcp_demo__env", {"name": "TOKEN"}, user_id="alice")["for_llm"] == "[REDACTED]"
    assert call(member_a, "mcp_demo__env", {"name": "TOKEN"})["for_llm"] == "[REDACTED]"
    # text next to an image is scrubbed in the content blocks too
    mixed = call(member_a, "mcp_demo__captioned", {"caption": "token is server-token-1234"})
    assert mixed["for_llm"].startswith("token is [REDACTED]")
    assert mixed["content"][0] == {"type": "text", "text": "token is [REDACTED]"}
    assert mixed["content"][1]["type"] == "image"
    assert "server-token-1234" not in str(mixed)


def test_the_discovery_job_stores_tools_and_status_and_keeps_no_connection(tenant_a, mcp_connections):
    from apps.mcp_grants import tasks

    system = Actor.system(tenant_a)
    server = services.server_create(actor=system, name="found", **stdio_fields())
    version = type(tenant_a).objects.get(pk=tenant_a.pk).config_version
    assert tasks.discover(str(tenant_a.pk), str(server.pk)) is True
    row = MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk)
    assert row.status == MCPServer.Status.CONNECTED
    assert row.last_health["latency_ms"] > 0
    assert (
        set(MCPServerTool.objects.for_tenant(tenant_a).filter(server=server).values_list("name", flat=True))
        == TOOLS
    )
    assert type(tenant_a).objects.get(pk=tenant_a.pk).config_version > version
    assert not mcp_connections.connection_states()  # a one-off session, closed again

    broken = services.server_create(
        actor=system, name="broken", **{**stdio_fields(), "args": [stdio_fields()["args"][0], "nowhere"]}
    )
    assert tasks.discover(str(tenant_a.pk), str(broken.pk)) is False
    row = MCPServer.objects.for_tenant(tenant_a).get(pk=broken.pk)
    assert row.status == MCPServer.Status.ERROR
    assert row.last_health["error"]
    assert not MCPServerTool.objects.for_tenant(tenant_a).filter(server=broken).exists()


def test_health_checks_find_a_dead_server_without_a_call_and_reconnect_it(tenant_a, member_a, settings):
    settings.TOOLGATE_MCP_HEALTH_SECONDS = 0.5
    server, _ = register(tenant_a)
    pid = call(member_a, "mcp_demo__pid")["for_llm"]
    assert kill_stdio_servers() >= 1  # ours, and any server an earlier test left dying

    seen = set()
    # A dead stdio server is found by a closed connection at once, or by three pings that time out
    # (HEALTH_FAIL_THRESHOLD x PING_TIMEOUT): both must fit.
    deadline = time.monotonic() + client.HEALTH_FAIL_THRESHOLD * (client.PING_TIMEOUT + 1) + 30
    while True:
        row = MCPServer.objects.for_tenant(tenant_a).get(pk=server.pk)
        seen.add(row.status)
        if "disconnected" in seen and row.status == "connected":
            break
        assert time.monotonic() < deadline, (seen, row.last_health)
        time.sleep(0.05)
    # The status row may also be written by another process's health check: a call that works again is
    # the proof that this process reconnected.
    while (again := call(member_a, "mcp_demo__pid"))["is_error"]:
        assert time.monotonic() < deadline, again["for_llm"]
        assert "reconnecting" in again["for_llm"] or "disconnected" in again["for_llm"], again["for_llm"]
        time.sleep(0.5)
    assert again["for_llm"] != pid


def test_concurrent_first_calls_share_one_connection(tenant_a, member_a, mcp_connections):
    from concurrent.futures import ThreadPoolExecutor

    system = Actor.system(tenant_a)
    server = services.server_create(actor=system, name="demo", **stdio_fields())
    endpoint = client.endpoint_for(server)

    def first_call(_: int) -> str:
        result = mcp_connections.run(mcp_connections.call(endpoint, "pid", {}), 60)
        return str(result.content[0].text)

    with ThreadPoolExecutor(8) as pool:
        pids = set(pool.map(first_call, range(8)))
    assert len(pids) == 1
    assert list(mcp_connections.connection_states()) == [(str(server.pk), "")]
