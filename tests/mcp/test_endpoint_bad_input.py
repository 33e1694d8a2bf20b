"""Hostile JSON on the MCP endpoint: a JSON-RPC error or an error result, never a server error. As on the
REST execute route, a NUL character in a tool's arguments reaches the pipeline, which refuses the call as
invalid and records it (with the NUL replaced); nothing else is recorded."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import INITIALIZE, MCP_HEADERS, endpoint

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CALL = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "datetime", "arguments": %s}}'
BODIES = [
    CALL % '{"timezone": "UTC", "n": 1e999}',
    CALL % '{"timezone": "UTC", "n": NaN}',
    CALL % '{"timezone": "UTC", "n": -Infinity}',
    CALL % '{"timezone": "UTC\\u0000"}',
    CALL % '{"timezone\\u0000": "UTC"}',
    CALL % '{"timezone": "UTC", "timezone": "UTC"}',
    CALL % '{"timezone": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"jsonrpc": "2.0", "id": 3, "method": ',
    "[1, 2]",
    "null",
]


def test_hostile_json_never_fails_the_server(live: Any, tenant_a: Tenant) -> None:
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    key = factories.make_api_key(tenant_a, Role.MEMBER)
    url = endpoint(str(live.daphne()))
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=60) as client:
        opened = client.post(url, json=INITIALIZE, headers=headers)
        assert opened.status_code == 200, opened.text
        session = opened.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        client.post(url, content=json.dumps(initialized), headers=headers)
        for body in BODIES:
            response = client.post(url, content=body, headers=headers)
            assert response.status_code < 500, f"{body[70:150]}: {response.status_code} {response.text[:300]}"
            if response.status_code == 200:
                assert '"isError":true' in response.text.replace(" ", "") or '"error"' in response.text, (
                    f"{body[70:150]}: {response.text[:300]}"
                )
        duplicate = client.post(url, content=BODIES[5], headers=headers)
        assert duplicate.status_code == 400
        error = duplicate.json()["error"]
        assert error["code"] == -32700
        assert (
            error["message"] == "JSON parse error - duplicate key 'timezone' in an object; name each key once"
        )
        nul = client.post(url, content=BODIES[3], headers=headers)
        assert nul.status_code == 200, nul.text
        assert "NUL character" in nul.text
    # The two NUL bodies of the loop and the one above: refused by the pipeline, recorded as invalid.
    recorded = list(ToolCall.objects.for_tenant(tenant_a).values_list("decision", flat=True))
    assert recorded == ["invalid"] * 3
