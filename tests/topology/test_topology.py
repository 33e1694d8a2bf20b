"""The production topology on real parts (``tests/topology/harness.py``): a standalone PostgreSQL
server with pgvector, PgBouncer in transaction mode, Redis, and HAProxy in front of two nodes, each
``make run``'s supervisor with its own web workers, django-q2 cluster and data directory. Every step goes
through the load balancer; a header picks the node a step is served by.

One topology serves the whole module (it takes a minute or two to start); the node-kill test runs last.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.live.wsclient import EventSocket, event_of
from tests.processes import wait_until
from tests.topology.harness import NODES, Topology, running

# The topology's start (two minutes on a busy machine) counts toward the first test's time.
pytestmark = [pytest.mark.live, pytest.mark.topology, pytest.mark.timeout(900)]
DEMO = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "demo.py"


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    with running() as started:
        yield started


@pytest.fixture(scope="module")
def owner(topology: Topology) -> str:
    key = topology.owner_key("acme")
    with api(topology, key, "node1") as web:
        assert web.post("/api/v1/agents/", json={"key": "bot", "name": "Bot"}).status_code == 201
    return key


def api(topology: Topology, key: str, node: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"}
    if node:
        headers["X-Toolgate-Node"] = node
    return httpx.Client(base_url=topology.url, headers=headers, timeout=60)


def served_by(response: httpx.Response, node: str) -> httpx.Response:
    assert response.headers.get("x-toolgate-node") == node, (response.headers, response.text[:300])
    return response


def put_policy(web: httpx.Client, document: dict[str, Any]) -> None:
    response = web.put("/api/v1/policy/tenant/", json={"document": document, "note": "topology test"})
    assert response.status_code == 200, response.text


def test_the_nodes_share_one_database_through_pgbouncer_and_both_serve(topology, owner):
    ready = {}
    for node in NODES:
        with api(topology, owner, node) as web:
            response = served_by(web.get("/readyz"), node)
            assert response.status_code == 200, response.text
            ready[node] = response.json()["checks"]
            agents = served_by(web.get("/api/v1/agents/"), node).json()["results"]
            assert [a["key"] for a in agents] == ["bot"]
    # Each node's django-q2 cluster registered itself; both see both (one Redis, one database).
    assert {checks["q2_cluster"]["clusters"] for checks in ready.values()} == {2}


def test_a_socket_on_node1_receives_what_node2_causes(topology, owner):
    with contextlib.ExitStack() as stack:
        headers = {"Authorization": f"Bearer {owner}", "X-Toolgate-Node": "node1"}
        sock = EventSocket(
            stack.enter_context(connect(topology.ws_url, additional_headers=headers, open_timeout=10))
        )
        handshake = sock.connection.response
        assert handshake is not None
        assert handshake.headers.get("x-toolgate-node") == "node1"
        assert sock.recv()["type"] == "hello"
        sock.subscribe(["agents"])
        with api(topology, owner, "node2") as web:
            served_by(web.post("/api/v1/agents/", json={"key": "from-node2", "name": "N2"}), "node2")
        event = sock.wait_for(lambda m: event_of(m, topic="agents", type="agent.created"))["event"]
        assert event["data"]["key"] == "from-node2"
        assert event["tenant"] == "acme"


def test_an_approval_decided_on_node2_releases_the_call_waiting_on_node1(topology, owner):
    with api(topology, owner, "node1") as one, api(topology, owner, "node2") as two:
        put_policy(one, {"execApproval": {"security": "full", "ask": "on-miss"}})
        body = {"agent": "bot", "tool": "exec", "args": {"command": "touch approved && echo released"}}
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(one.post, "/api/v1/runtime/execute", json=body)
            pending = wait_until(
                lambda: served_by(two.get("/api/v1/approvals/?status=pending"), "node2").json()["results"],
                timeout=30,
            )
            decided = two.post(
                f"/api/v1/approvals/{pending[0]['id']}/decide", json={"decision": "allow-once"}
            )
            assert served_by(decided, "node2").status_code == 200, decided.text
            result = served_by(waiting.result(timeout=60), "node1")
        put_policy(one, {})
    assert result.status_code == 200, result.text
    assert result.json()["is_error"] is False, result.text
    assert "released" in result.json()["for_llm"]


def test_rate_limits_hold_across_the_nodes(topology, owner):
    with api(topology, owner, "node1") as one, api(topology, owner, "node2") as two:
        put_policy(one, {"rate_limit_per_hour": 4})
        try:
            outcomes = []
            for number in range(8):
                web = one if number % 2 == 0 else two
                body = {"agent": "bot", "tool": "datetime", "args": {}, "context": {"session_key": "limited"}}
                response = web.post("/api/v1/runtime/execute", json=body)
                assert response.status_code in (200, 429), response.text
                outcomes.append(response.status_code == 200 and response.json()["is_error"] is False)
        finally:
            put_policy(one, {})
    # Four calls in all, not four per node.
    assert outcomes == [True] * 4 + [False] * 4


def test_a_policy_change_is_seen_on_both_nodes_at_once(topology, owner):
    with api(topology, owner, "node1") as one, api(topology, owner, "node2") as two:

        def names(web: httpx.Client) -> set[str]:
            return {tool["name"] for tool in web.get("/api/v1/agents/bot/tools?format=mcp").json()["tools"]}

        assert "datetime" in names(one)
        assert "datetime" in names(two)  # both nodes have the listing cached now
        put_policy(one, {"deny": ["datetime"]})
        try:
            assert "datetime" not in names(two)
            refused = two.post(
                "/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime", "args": {}}
            )
            assert refused.json()["is_error"] is True, refused.text
            assert "not allowed by policy" in refused.json()["for_llm"]
        finally:
            put_policy(one, {})
        assert "datetime" in names(two)


def test_an_mcp_server_serves_calls_on_both_nodes_and_its_health_agrees(topology, owner):
    with api(topology, owner, "node1") as one, api(topology, owner, "node2") as two:
        created = one.post(
            "/api/v1/mcp/servers/",
            json={
                "name": "demo",
                "transport": "stdio",
                "command": sys.executable,
                "args": [str(DEMO), "stdio"],
            },
        )
        assert created.status_code == 201, created.text
        assert one.put("/api/v1/mcp/servers/demo/grants/agents/bot/", json={}).status_code in (200, 201)
        wait_until(lambda: one.get("/api/v1/mcp/servers/demo/").json()["status"] == "connected", timeout=60)
        for web, node in ((one, "node1"), (two, "node2")):
            body = {"agent": "bot", "tool": "mcp_demo__echo", "args": {"text": f"via {node}"}}
            response = served_by(web.post("/api/v1/runtime/execute", json=body), node)
            assert response.json()["is_error"] is False, response.text
            assert f"via {node}" in response.json()["for_llm"]
        statuses = {web.get("/api/v1/mcp/servers/demo/").json()["status"] for web in (one, two)}
        assert statuses == {"connected"}


def test_the_mcp_endpoint_works_across_the_nodes(topology, owner):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def rpc(web: httpx.Client, node: str, method: str, params: dict[str, Any], ident: int) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        response = served_by(web.post("/mcp/bot/", content=json.dumps(body), headers=headers), node)
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("application/json"):
            return response.json()  # type: ignore[no-any-return]
        data = [
            line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
        ]
        assert len(data) == 1, response.text  # one message: the answer
        return json.loads(data[0])  # type: ignore[no-any-return]

    with api(topology, owner, "node1") as one, api(topology, owner, "node2") as two:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert rpc(one, "node1", "initialize", init, 1)["result"]["serverInfo"]
        listed = rpc(two, "node2", "tools/list", {}, 2)["result"]["tools"]
        assert "datetime" in {tool["name"] for tool in listed}
        called = rpc(one, "node1", "tools/call", {"name": "datetime", "arguments": {}}, 3)["result"]
        assert called["isError"] is False


def test_killing_node1_under_load_fails_only_its_requests_in_flight(topology, owner):
    """Last: node 1 stays down. Clients keep calling through the load balancer while node 1 is killed;
    only requests already on node 1 may fail (those in flight when the kill began, one per client, and
    those that reached node 1 while its processes were dying), none sent once they are gone (a refused
    connection is redispatched to node 2) nor after HAProxy's health check took it out, and every call
    that was answered is in the database."""
    stop = threading.Event()
    answered: list[tuple[float, str]] = []  # (when, call id)
    failed: list[tuple[float, float]] = []  # when each failed request was sent, and when it failed
    lock = threading.Lock()

    def client() -> None:
        with api(topology, owner) as web:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    response = web.post(
                        "/api/v1/runtime/execute", json={"agent": "bot", "tool": "datetime", "args": {}}
                    )
                    ok = response.status_code == 200 and response.json().get("is_error") is False
                except httpx.HTTPError:
                    ok, response = False, None
                with lock:
                    if ok and response is not None:
                        answered.append((time.monotonic(), response.json()["call_id"]))
                    else:
                        failed.append((sent, time.monotonic()))

    clients = [threading.Thread(target=client) for _ in range(4)]
    for thread in clients:
        thread.start()
    try:
        wait_until(lambda: len(answered) >= 20, timeout=60)
        killed_at = time.monotonic()
        topology.nodes["node1"].kill()
        gone_at = time.monotonic()  # every process of node 1 has exited
        time.sleep(5)
        settled_at = time.monotonic()
        time.sleep(5)
    finally:
        stop.set()
        for thread in clients:
            thread.join(timeout=60)

    assert [sent for sent, _ in failed if sent >= gone_at] == [], "sent after node 1 was gone, and failed"
    assert [ended for _, ended in failed if ended < killed_at] == []
    # Of those sent before the kill, at most the ones in flight on node 1 (one per client).
    assert len([sent for sent, _ in failed if sent < killed_at]) <= len(clients)
    assert len([t for t, _ in answered if t > settled_at]) > 10  # node 2 carried on

    # No answered call is missing from the database (read through node 2, page by page).
    ids = {call_id for _, call_id in answered}
    stored: set[str] = set()
    with api(topology, owner, "node2") as two:
        url: str | None = "/api/v1/tool-calls/?tool=datetime&page_size=200"
        while url:
            page = two.get(url).json()
            stored |= {uuid.UUID(row["id"]).hex for row in page["results"]}
            url = page.get("next")
    missing = ids - stored
    assert not missing, f"{len(missing)} answered calls have no row"
