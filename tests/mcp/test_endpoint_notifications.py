"""Progress and log notifications of a bridged MCP server's tool, through ``/mcp/<agent>/`` on a real
daphne to the SDK's client, from a real SDK server over stdio (``tests/mcp/servers/demo.py``, ``chatty``):
streamed on the call's own response before its result, in order, scrubbed of the connection's secrets,
filtered by the client's log level (``logging/setLevel`` on the handshake versions, remembered per key
and agent; the request's ``_meta`` on 2026-07-28), and nothing for a call the policy refuses or for
another tenant's key."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import endpoint, rest

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
    # logging/setLevel is the handshake versions' way, deprecated (not gone) in 2026-07-28's SDK API
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DEMO = Path(__file__).resolve().parent / "servers" / "demo.py"
TOKEN = "chatty-token-5e8d2a41c9"
TOOL = "mcp_demo__chatty"


@pytest.fixture
def demo(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="demo",
        transport="stdio",
        command=sys.executable,
        args=[str(DEMO), "stdio"],
        env={"TOKEN": TOKEN},
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    # The tool as discovery stores it (discovery runs in a worker, which these tests do not start).
    schema = {
        "type": "object",
        "properties": {"steps": {"type": "integer"}, "env_name": {"type": "string"}},
    }
    MCPServerTool.objects.create(tenant=tenant_a, server=server, name="chatty", input_schema=schema)
    return server


class Heard:
    """What a client heard during its calls: ``("progress", progress, total, message)`` and
    ``("log", level, data, logger)``, in order."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, ...]] = []

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.items.append(("log", params.level, params.data, params.logger))

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.items.append(("progress", progress, total, message))

    def logs(self) -> list[str]:
        return [item[1] for item in self.items if item[0] == "log"]


@asynccontextmanager
async def client(
    url: str, key: str, heard: Heard, *, modern: bool = False, log_level: Any = None
) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, logging_callback=heard.log, log_level=log_level) as session,
    ):
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield session


def chat(
    url: str,
    key: str,
    *,
    level: str | None = None,
    progress: bool = True,
    modern: bool = False,
    meta_level: str | None = None,
) -> tuple[types.CallToolResult, Heard]:
    heard = Heard()

    async def go() -> types.CallToolResult:
        async with client(url, key, heard, modern=modern, log_level=meta_level) as session:
            if level is not None:
                await session.set_logging_level(level)  # type: ignore[arg-type]  # handshake-era API
            return await session.call_tool(
                TOOL,
                {"steps": 3, "env_name": "TOKEN"},
                progress_callback=heard.progress if progress else None,
            )

    return asyncio.run(go()), heard


def test_progress_and_logs_reach_the_client_in_order_before_the_result_scrubbed(base, tenant_a, demo):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    result, heard = chat(endpoint(base), member)
    assert not result.is_error, result
    assert [getattr(block, "text", None) for block in result.content] == ["done in 3 steps"]
    # Info and above unless the key asked otherwise: the debug message is not passed on.
    assert heard.items == [
        ("progress", 1.0, 3.0, "step 1 of 3 with [REDACTED]"),
        ("progress", 2.0, 3.0, "step 2 of 3 with [REDACTED]"),
        ("progress", 3.0, 3.0, "step 3 of 3 with [REDACTED]"),
        ("log", "info", {"event": "halfway", "secret": "[REDACTED]"}, "demo"),
        ("log", "warning", "careful with [REDACTED]", "demo"),
    ]
    assert TOKEN not in repr(heard.items)
    call = ToolCall.objects.for_tenant(tenant_a).get()
    assert (call.tool, call.status) == (TOOL, "ok")

    # Without a progress token there is no progress; the logs still come.
    _, quiet = chat(endpoint(base), member, progress=False)
    assert [item[0] for item in quiet.items] == ["log", "log"]


def test_the_level_a_key_sets_holds_for_its_later_calls_and_for_no_other_key(base, tenant_a, demo):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    other = factories.make_api_key(tenant_a, Role.MEMBER)
    _, heard = chat(endpoint(base), member, level="debug")
    assert heard.logs() == ["debug", "info", "warning"]
    assert "debug detail [REDACTED]" in repr(heard.items)
    # A later request by the same key (a new HTTP exchange: the endpoint is stateless) keeps it.
    _, later = chat(endpoint(base), member, progress=False)
    assert later.logs() == ["debug", "info", "warning"]
    _, other_heard = chat(endpoint(base), other, progress=False)
    assert other_heard.logs() == ["info", "warning"]
    _, severe = chat(endpoint(base), member, level="error", progress=False)
    assert severe.items == []

    # A viewer may set its own level (it changes nothing but what the key hears).
    viewer = factories.make_api_key(tenant_a, Role.VIEWER)

    async def set_level() -> types.EmptyResult:
        async with client(endpoint(base), viewer, Heard()) as session:
            return await session.set_logging_level("debug")

    assert isinstance(asyncio.run(set_level()), types.EmptyResult)


def test_on_2026_07_28_the_request_asks_for_logs_and_gets_none_without_asking(base, tenant_a, demo):
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    result, asked = chat(endpoint(base), member, modern=True, meta_level="warning")
    assert not result.is_error, result
    assert [item for item in asked.items if item[0] == "log"] == [
        ("log", "warning", "careful with [REDACTED]", "demo")
    ]
    assert [item[3] for item in asked.items if item[0] == "progress"] == [
        f"step {n} of 3 with [REDACTED]" for n in (1, 2, 3)
    ]
    _, silent = chat(endpoint(base), member, modern=True, progress=False)
    assert silent.items == []


def test_a_refused_call_and_another_tenant_hear_nothing(base, tenant_a, tenant_b, demo):
    admin = factories.make_api_key(tenant_a, Role.ADMIN)
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    with rest(base, admin) as http:
        response = http.put("/api/v1/policy/tenant/", json={"document": {"deny": ["group:mcp:demo"]}})
    assert response.status_code == 200, response.text
    refused, heard = chat(endpoint(base), member, level="debug")
    assert refused.is_error
    assert heard.items == []

    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    outsider = factories.make_api_key(tenant_b, Role.OWNER)
    missing, outside = chat(endpoint(base), outsider, level="debug")
    assert missing.is_error
    assert "unknown tool" in getattr(missing.content[0], "text", "")
    assert outside.items == []
    assert not ToolCall.objects.for_tenant(tenant_a).filter(status="ok").exists()
