"""An agent's MCP resources and prompts in the dashboard (``/agents/<key>/mcp/``), against a real SDK
server over stdio (``tests/mcp/servers/library.py``): the listings for viewers and up; reads and prompt
gets for members and up, scrubbed of the connection's secrets and recorded; a viewer's POST refused with
nothing recorded; another tenant's agent 404; the grant's switches hide them."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.test import Client

from apps.audit.models import ToolCall
from apps.mcp_grants import services
from apps.mcp_grants.models import MCPServer
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.dashboard.personas import login
from tests.mcp.conftest import mcp_connections  # noqa: F401  (the fixture)
from tests.mcp.servers.library import PIXEL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_connections")]

LIBRARY = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "library.py"
TOKEN = "dash-lib-token-7d2b9e41"
PAGE = "/agents/bot/mcp/"


@pytest.fixture
def library(tenant_a: Tenant, bot: Agent) -> MCPServer:
    server = services.server_create(
        actor=Actor.system(tenant_a),
        name="lib",
        transport="stdio",
        command=sys.executable,
        args=[str(LIBRARY), "stdio"],
        env={"LIBRARY_TOKEN": TOKEN},
    )
    services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=bot)
    return server


def _calls(tenant: Tenant) -> list[ToolCall]:
    return list(ToolCall.objects.for_tenant(tenant).order_by("created_at"))


def test_the_agent_pages_link_to_it(admin: Client, viewer: Client, bot: Agent) -> None:
    assert PAGE in admin.get("/agents/bot/edit/").content.decode()
    for url in ("/agents/bot/memory/", "/agents/bot/context-files/", "/agents/bot/knowledge/"):
        assert PAGE in viewer.get(url).content.decode(), url


def test_listing_for_a_viewer_without_forms(viewer: Client, library: MCPServer) -> None:
    response = viewer.get(PAGE)
    assert response.status_code == 200
    page = response.content.decode()
    for shown in ("library://readme", "What this library holds.", "text/plain", "library://books/{book}"):
        assert shown in page
    assert "mcp_lib__summarize" in page
    assert "Summarize a topic." in page
    assert "topic" in page
    assert "/agents/bot/mcp/read/" not in page
    assert "/agents/bot/mcp/prompt/" not in page
    assert TOKEN not in page


def test_an_agent_without_any(viewer: Client, bot: Agent) -> None:
    page = viewer.get(PAGE).content.decode()
    assert "This agent has no MCP resources." in page
    assert "This agent has no MCP prompts." in page


def test_member_reads_scrubbed_and_recorded(member: Client, tenant_a: Tenant, library: MCPServer) -> None:
    page = member.get(PAGE).content.decode()
    assert 'action="/agents/bot/mcp/read/"' in page
    assert 'action="/agents/bot/mcp/prompt/"' in page
    response = member.post("/agents/bot/mcp/read/", {"uri": "library://token"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "the token is [REDACTED]" in page
    assert TOKEN not in page
    pixel = member.post("/agents/bot/mcp/read/", {"uri": "library://pixel"}).content.decode()
    assert f"binary, {len(PIXEL)} bytes, image/png" in pixel
    assert 'src="data:image/png;base64,' in pixel
    book = member.post("/agents/bot/mcp/read/", {"uri": "library://books/12"}).content.decode()
    assert "Book 12: once upon a time." in book
    assert [row.args["uri"] for row in _calls(tenant_a)] == [
        "library://token",
        "library://pixel",
        "library://books/12",
    ]

    refused = member.post("/agents/bot/mcp/read/", {"uri": "nowhere://x"})
    assert refused.status_code == 400
    assert 'class="form-errors" role="alert"' in refused.content.decode()
    assert "lib" in refused.content.decode()
    assert len(_calls(tenant_a)) == 4


def test_member_gets_a_prompt_with_an_argument(member: Client, tenant_a: Tenant, library: MCPServer) -> None:
    response = member.post("/agents/bot/mcp/prompt/", {"name": "mcp_lib__summarize", "arg.topic": "tides"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Summarize tides in 50 words." in page
    assert "<strong>user</strong>" in page
    token = member.post("/agents/bot/mcp/prompt/", {"name": "mcp_lib__token_prompt"}).content.decode()
    assert TOKEN not in token
    assert "use [REDACTED]" in token
    assert "image (image/png)" in token
    calls = _calls(tenant_a)
    assert [row.tool for row in calls] == ["prompts/get", "prompts/get"]
    assert calls[0].args["arguments"] == {"topic": "tides"}

    missing = member.post("/agents/bot/mcp/prompt/", {"name": "mcp_x__y"})
    assert missing.status_code == 400
    assert "not found" in missing.content.decode()


def test_viewer_post_is_refused_with_nothing_recorded(
    viewer: Client, tenant_a: Tenant, library: MCPServer
) -> None:
    assert viewer.post("/agents/bot/mcp/read/", {"uri": "library://readme"}).status_code == 403
    assert viewer.post("/agents/bot/mcp/prompt/", {"name": "mcp_lib__summarize"}).status_code == 403
    assert _calls(tenant_a) == []


def test_another_tenants_agent_is_404(outsider: Client, tenant_a: Tenant, library: MCPServer) -> None:
    assert outsider.get(PAGE).status_code == 404
    assert outsider.post("/agents/bot/mcp/read/", {"uri": "library://readme"}).status_code == 404
    assert outsider.post("/agents/bot/mcp/prompt/", {"name": "mcp_lib__summarize"}).status_code == 404
    assert _calls(tenant_a) == []


def test_posts_need_csrf(tenant_a: Tenant, library: MCPServer) -> None:
    user = factories.make_user(tenant_a, Role.MEMBER, email="csrf@a.test")
    client = login(user)
    client.handler.enforce_csrf_checks = True
    assert client.post("/agents/bot/mcp/read/", {"uri": "library://readme"}).status_code == 403
    assert _calls(tenant_a) == []


def test_the_grant_switches_hide_them(
    viewer: Client, tenant_a: Tenant, bot: Agent, library: MCPServer
) -> None:
    services.agent_grant_set(
        actor=Actor.system(tenant_a), server=library, agent=bot, resources=False, prompts=False
    )
    page = viewer.get(PAGE).content.decode()
    assert "library://readme" not in page
    assert "mcp_lib__summarize" not in page
    assert "This agent has no MCP resources." in page
    assert "This agent has no MCP prompts." in page


def test_a_server_in_error_is_named_and_not_waited_for(
    viewer: Client, tenant_a: Tenant, library: MCPServer
) -> None:
    hanging = services.server_create(
        actor=Actor.system(tenant_a),
        name="hang",
        transport="stdio",
        command=sys.executable,
        args=[str(LIBRARY.parent / "hanging.py"), "stdio"],  # answers; in error it is not even asked
    )
    services.agent_grant_set(actor=Actor.system(tenant_a), server=hanging, agent=library_agent(tenant_a))
    MCPServer.objects.for_tenant(tenant_a).filter(pk=hanging.pk).update(
        status=MCPServer.Status.ERROR, last_health={"error": "initialize timed out"}
    )
    started = time.monotonic()

    page = viewer.get(PAGE).content.decode()

    assert time.monotonic() - started < 5  # the hanging server was not asked
    assert "library://readme" in page  # the working server still listed
    left_out = page[page.index("data-mcp-unreachable") :]
    assert "<code>hang</code>" in left_out
    assert "not connected: initialize timed out" in left_out


def library_agent(tenant: Tenant) -> Agent:
    return Agent.objects.for_tenant(tenant).get(key="bot")
