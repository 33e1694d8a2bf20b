"""Toolgate's MCP endpoint (``/mcp/<agent>/``) fuzzed with Hypothesis over real HTTP on daphne:
JSON-RPC messages with known and unknown methods, hostile params and ids, notifications, batches, and
bodies that are not JSON-RPC or not JSON at all. Whatever arrives, the endpoint never answers a server
error, and every JSON answer is a JSON-RPC response (a result or an error with an integer code) or an
HTTP error; a tool call it ran is recorded. ``TOOLGATE_FUZZ_EXAMPLES`` sets the examples (120)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests import factories
from tests.fuzz.strategies import json_values
from tests.mcp.endpoint_client import INITIALIZE, MCP_HEADERS, endpoint

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

METHODS = (
    "initialize",
    "notifications/initialized",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "prompts/list",
    "logging/setLevel",
    "completion/complete",
    "server/discover",
    "notifications/cancelled",
    "",
    "tools/",
    "../../admin",
)
TOOLS = ("datetime", "read_file", "exec", "mcp_search", "nope", "", "x" * 300)

ids = st.one_of(st.none(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False), json_values(3))
params = st.one_of(
    json_values(10),
    st.fixed_dictionaries(
        {"name": st.sampled_from(TOOLS)},
        optional={
            "arguments": st.one_of(st.dictionaries(st.text(max_size=10), json_values(4)), json_values(4))
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": st.sampled_from(["2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01", ""]),
            "capabilities": json_values(4),
            "clientInfo": json_values(4),
            "cursor": json_values(1),
        },
    ),
)
message = st.fixed_dictionaries(
    {"method": st.one_of(st.sampled_from(METHODS), st.text(max_size=30))},
    optional={"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": ids, "params": params},
)
bodies = st.one_of(
    message,
    st.lists(message, min_size=0, max_size=4),
    json_values(8),
)
raw = st.one_of(st.binary(max_size=200), st.just(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"'))

FUZZ = settings(
    max_examples=int(os.environ.get("TOOLGATE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.fixture
def target(live: Any, tenant_a: Tenant) -> Iterator[tuple[httpx.Client, str]]:
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    key = factories.make_api_key(tenant_a, "member")
    url = endpoint(live.daphne())
    client = httpx.Client(timeout=60, headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"})
    yield client, url
    client.close()


def _answers(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of a response: its JSON body, or the data lines of an event stream."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    if not response.content:
        return []
    body = response.json()
    return body if isinstance(body, list) else [body]


def _check(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    event(f"status {response.status_code}")
    for answer in _answers(response):
        assert isinstance(answer, dict), answer
        if "jsonrpc" not in answer:  # an HTTP error before the MCP layer: the REST error envelope
            assert response.status_code >= 400, answer
            assert "error" in answer, answer
            continue
        assert answer["jsonrpc"] == "2.0", answer
        assert ("result" in answer) != ("error" in answer), answer
        if "error" in answer:
            assert isinstance(answer["error"]["code"], int), answer
            assert isinstance(answer["error"]["message"], str), answer


@FUZZ
@given(body=bodies, initialize=st.booleans())
def test_any_json_rpc_gets_a_json_rpc_answer_never_a_server_error(target, body, initialize):
    client, url = target
    if initialize:
        _check(client.post(url, json=INITIALIZE))
    _check(client.post(url, json=body))


@FUZZ
@given(
    body=raw,
    kind=st.sampled_from(["application/json", "text/plain", "application/json; charset=latin-1", ""]),
)
def test_bytes_that_are_not_json_rpc_never_give_a_server_error(target, body, kind):
    client, url = target
    response = client.post(url, content=body, headers={"Content-Type": kind} if kind else {})
    assert response.status_code < 500, (response.status_code, response.text[:500])
