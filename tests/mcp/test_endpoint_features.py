"""Resources, prompts and completion of bridged MCP servers out of ``/mcp/<agent>/``, through a real
daphne and a real SDK server (``tests/mcp/servers/library.py`` over stdio): listed, read and got under a
grant, hidden by the grant's switches and by the policy like the server's tools, scrubbed of the
connection's secrets, binary contents passed on and bounded, every read and get recorded like a tool call
(without its contents), and nothing of another tenant; completion asked of the server that offers the
prompt or the template.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.mcp_grants import client as mcp_client
from apps.mcp_grants import services as mcp_services
from apps.mcp_grants.models import MCPServer, MCPServerTool
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.mcp.endpoint_client import endpoint, rest, session

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

LIBRARY = Path(__file__).resolve().parent / "servers" / "library.py"
DEMO = Path(__file__).resolve().parent / "servers" / "demo.py"
TOKEN = "lib-token-7f3a9c2e5b1d"
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@pytest.fixture
def member(tenant_a: Tenant, agent: Agent) -> str:
    return factories.make_api_key(tenant_a, Role.MEMBER)


@pytest.fixture
def admin(tenant_a: Tenant, agent: Agent) -> str:
    return factories.make_api_key(tenant_a, Role.ADMIN)


def library(tenant: Tenant, name: str = "lib", **fields: Any) -> MCPServer:
    return mcp_services.server_create(
        actor=Actor.system(tenant),
        name=name,
        transport="stdio",
        command=sys.executable,
        args=[str(LIBRARY), "stdio"],
        env={"LIBRARY_TOKEN": TOKEN},
        **fields,
    )


@pytest.fixture
def granted(tenant_a: Tenant, agent: Agent) -> MCPServer:
    server = library(tenant_a)
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=server, agent=agent)
    return server


def listing(url: str, key: str) -> tuple[list[str], list[str]]:
    async def go() -> tuple[list[str], list[str]]:
        async with session(url, key) as client:
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
        return [str(r.uri) for r in resources.resources], [
            t.uri_template for t in templates.resource_templates
        ]

    return asyncio.run(go())


def _read(url: str, key: str, uri: str) -> types.ReadResourceResult | MCPError:
    async def go() -> types.ReadResourceResult | MCPError:
        async with session(url, key) as client:
            try:
                return await client.read_resource(uri)
            except MCPError as error:  # caught here: the session's task group would wrap it
                return error

    return asyncio.run(go())


def read(url: str, key: str, uri: str) -> types.ReadResourceResult:
    result = _read(url, key, uri)
    assert isinstance(result, types.ReadResourceResult), result
    return result


def refused(url: str, key: str, uri: str) -> MCPError:
    result = _read(url, key, uri)
    assert isinstance(result, MCPError), result
    return result


def put_grant(base: str, admin: str, server: str, **fields: Any) -> None:
    with rest(base, admin) as client:
        response = client.put(f"/api/v1/mcp/servers/{server}/grants/agents/bot/", json=fields)
    assert response.status_code == 200, response.text


def put_policy(base: str, admin: str, document: dict[str, Any]) -> None:
    with rest(base, admin) as client:
        response = client.put("/api/v1/policy/tenant/", json={"document": document})
    assert response.status_code == 200, response.text


def test_resources_are_listed_and_read_under_a_grant_scrubbed_and_recorded(base, tenant_a, granted, member):
    url = endpoint(base)
    uris, templates = listing(url, member)
    assert uris == ["library://readme", "library://token", "library://pixel"]
    assert templates == ["library://books/{book}", "library://zeros/{size}"]

    book = read(url, member, "library://books/7")
    assert [(str(c.uri), getattr(c, "text", None)) for c in book.contents] == [
        ("library://books/7", "Book 7: once upon a time.")
    ]

    # The connection's own secret (its environment) never reaches the client.
    token = read(url, member, "library://token").contents[0]
    assert isinstance(token, types.TextResourceContents)
    assert TOKEN not in token.text
    assert token.text.startswith("the token is ")

    pixel = read(url, member, "library://pixel").contents[0]
    assert isinstance(pixel, types.BlobResourceContents)
    assert pixel.blob == PIXEL
    assert pixel.mime_type == "image/png"

    # Each read is a ToolCall row: the URI and the server, the size, never the contents.
    calls = list(ToolCall.objects.for_tenant(tenant_a).filter(tool="resources/read").order_by("created_at"))
    assert [c.args for c in calls] == [
        {"uri": "library://books/7", "server": "lib"},
        {"uri": "library://token", "server": "lib"},
        {"uri": "library://pixel", "server": "lib"},
    ]
    assert all(c.decision == "allowed" and c.status == "ok" and c.agent_key == "bot" for c in calls)
    assert calls[0].for_llm_bytes == len("Book 7: once upon a time.")
    assert calls[2].for_llm_bytes == len(base64.b64decode(PIXEL))
    assert calls[0].resolved_tool == "mcp_lib__{resources}"


def test_large_contents_are_refused_and_recorded_without_them(base, tenant_a, granted, member):
    error = refused(endpoint(base), member, "library://zeros/9000000")
    assert "more than 8388608 bytes" in error.error.message
    assert error.error.data["code"] == "too_large"
    call = ToolCall.objects.for_tenant(tenant_a).get(tool="resources/read")
    assert call.status == "error"
    assert call.for_llm_bytes == 0
    assert call.args == {"uri": "library://zeros/9000000", "server": "lib"}


def test_the_grant_switch_and_the_policy_hide_resources_like_the_servers_tools(base, granted, member, admin):
    url = endpoint(base)
    assert listing(url, member)[0]

    put_grant(base, admin, "lib", resources=False)
    assert listing(url, member) == ([], [])
    assert refused(url, member, "library://readme").error.data["code"] == "not_found"

    put_grant(base, admin, "lib", resources=True)
    put_policy(base, admin, {"deny": ["group:mcp:lib"]})
    assert listing(url, member) == ([], [])
    put_policy(base, admin, {"deny": ["mcp_lib__*"]})
    assert listing(url, member) == ([], [])
    # An allow list of single tools leaves them out; the server's group keeps them.
    put_policy(base, admin, {"allow": ["datetime"]})
    assert listing(url, member) == ([], [])
    put_policy(base, admin, {"allow": ["datetime", "group:mcp:lib"]})
    assert listing(url, member)[0] == ["library://readme", "library://token", "library://pixel"]
    # The request's own tool_allow narrows them the same way.
    assert listing(endpoint(base, query="tool_allow=datetime"), member) == ([], [])


def test_a_uri_two_servers_offer_is_refused_and_names_both(base, tenant_a, agent, granted, member):
    other = library(tenant_a, "shelf")
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=other, agent=agent)
    url = endpoint(base)
    assert listing(url, member)[0].count("library://readme") == 2
    error = refused(url, member, "library://readme")
    assert error.error.data["code"] == "conflict"
    assert "'lib'" in error.error.message
    assert "'shelf'" in error.error.message


def test_a_viewer_lists_but_does_not_read(base, tenant_a, granted):
    viewer = factories.make_api_key(tenant_a, Role.VIEWER)
    url = endpoint(base)
    assert listing(url, viewer)[0]
    error = refused(url, viewer, "library://readme")
    assert error.error.data["code"] == "permission_denied"
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


def test_nothing_of_another_tenant(base, tenant_a, tenant_b, granted):
    outsider = factories.make_api_key(tenant_b, Role.OWNER)

    # Tenant A's agent does not exist for tenant B's key: 404, nothing read or recorded.
    async def go() -> int:
        import httpx

        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                endpoint(base),
                headers={
                    "Authorization": f"Bearer {outsider}",
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                },
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "resources/read",
                    "params": {"uri": "library://readme"},
                },
            )
        return response.status_code

    assert asyncio.run(go()) == 404
    # Tenant B's own agent has no grant of tenant A's server: no resources.
    services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    assert listing(endpoint(base), outsider) == ([], [])
    assert refused(endpoint(base), outsider, "library://readme").error.data["code"] == "not_found"
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


# --- prompts and completion ---------------------------------------------------------------------------


def prompt_names(url: str, key: str) -> list[str]:
    async def go() -> list[str]:
        async with session(url, key) as client:
            return [p.name for p in (await client.list_prompts()).prompts]

    return asyncio.run(go())


def get(
    url: str, key: str, name: str, arguments: dict[str, str] | None = None
) -> types.GetPromptResult | MCPError:
    async def go() -> types.GetPromptResult | MCPError:
        async with session(url, key) as client:
            try:
                return await client.get_prompt(name, arguments)
            except MCPError as error:  # caught here: the session's task group would wrap it
                return error

    return asyncio.run(go())


def completion(url: str, key: str, ref: Any, name: str, value: str) -> list[str] | MCPError:
    async def go() -> list[str] | MCPError:
        async with session(url, key) as client:
            try:
                return (await client.complete(ref, {"name": name, "value": value})).completion.values
            except MCPError as error:
                return error

    return asyncio.run(go())


def test_prompts_are_listed_under_registered_names_got_scrubbed_and_recorded(base, tenant_a, granted, member):
    url = endpoint(base)
    assert prompt_names(url, member) == ["mcp_lib__summarize", "mcp_lib__token_prompt"]

    summary = get(url, member, "mcp_lib__summarize", {"topic": "rivers"})
    assert isinstance(summary, types.GetPromptResult)
    assert [(m.role, getattr(m.content, "text", None)) for m in summary.messages] == [
        ("user", "Summarize rivers in 50 words.")
    ]

    token = get(url, member, "mcp_lib__token_prompt")
    assert isinstance(token, types.GetPromptResult)
    first, second = token.messages
    assert isinstance(first.content, types.TextContent)
    assert TOKEN not in first.content.text
    assert first.content.text.startswith("use ")
    assert isinstance(second.content, types.ImageContent)
    assert second.content.data == PIXEL

    calls = list(ToolCall.objects.for_tenant(tenant_a).filter(tool="prompts/get").order_by("created_at"))
    assert [c.args for c in calls] == [
        {"name": "mcp_lib__summarize", "arguments": {"topic": "rivers"}, "server": "lib"},
        {"name": "mcp_lib__token_prompt", "arguments": {}, "server": "lib"},
    ]
    assert [c.resolved_tool for c in calls] == ["mcp_lib__{prompts}"] * 2
    assert all(c.status == "ok" for c in calls)

    # A name no server of the agent's offers is refused, and recorded as unknown.
    missing = get(url, member, "mcp_lib__nope")
    assert isinstance(missing, MCPError)
    assert missing.error.data["code"] == "unavailable"  # the server itself does not know it
    assert "nope" in missing.error.message
    nowhere = get(url, member, "mcp_other__summarize")
    assert isinstance(nowhere, MCPError)
    assert nowhere.error.data["code"] == "not_found"
    assert ToolCall.objects.for_tenant(tenant_a).get(args__name="mcp_other__summarize").decision == "unknown"


def test_the_grant_switch_and_the_policy_hide_prompts(base, granted, member, admin):
    url = endpoint(base)
    put_grant(base, admin, "lib", prompts=False)
    assert prompt_names(url, member) == []
    refused = get(url, member, "mcp_lib__summarize", {"topic": "x"})
    assert isinstance(refused, MCPError)
    assert refused.error.data["code"] == "not_found"
    put_grant(base, admin, "lib", prompts=True)
    put_policy(base, admin, {"deny": ["group:mcp:lib"]})
    assert prompt_names(url, member) == []
    put_policy(base, admin, {"deny": []})
    assert prompt_names(url, member) == ["mcp_lib__summarize", "mcp_lib__token_prompt"]


def test_completion_is_asked_of_the_server_that_offers_the_prompt_or_template(base, granted, member):
    url = endpoint(base)
    assert completion(url, member, types.PromptReference(name="mcp_lib__summarize"), "topic", "h") == [
        "history",
        "horses",
        "hydrology",
    ]
    template = types.ResourceTemplateReference(uri="library://books/{book}")
    assert completion(url, member, template, "book", "12") == ["12", "123"]
    unknown = completion(url, member, types.PromptReference(name="summarize"), "topic", "h")
    assert isinstance(unknown, MCPError)
    assert unknown.error.data["code"] == "not_found"


def test_an_unprefixed_servers_prompts_keep_their_names_and_a_name_two_offer_is_refused(
    base, tenant_a, agent, member, admin
):
    system = Actor.system(tenant_a)
    plain = library(tenant_a, "plain", prefix_tools=False)
    mcp_services.agent_grant_set(actor=system, server=plain, agent=agent)
    url = endpoint(base)
    assert prompt_names(url, member) == ["summarize", "token_prompt"]

    summary = get(url, member, "summarize", {"topic": "lakes", "words": "9"})
    assert isinstance(summary, types.GetPromptResult)
    assert [getattr(m.content, "text", None) for m in summary.messages] == ["Summarize lakes in 9 words."]
    record = ToolCall.objects.for_tenant(tenant_a).get(tool="prompts/get")
    assert record.args["server"] == "plain"
    assert (record.resolved_tool, record.status) == ("mcp_plain__{prompts}", "ok")
    assert completion(url, member, types.PromptReference(name="summarize"), "topic", "ho") == ["horses"]

    # The policy decides them by the server's own namespace name, as for a prefixed server.
    put_policy(base, admin, {"deny": ["mcp_plain__*"]})
    assert prompt_names(url, member) == []
    put_policy(base, admin, {"deny": []})

    # A second unprefixed server offering the same prompt names: listed twice, got by neither.
    twin = library(tenant_a, "twin", prefix_tools=False)
    mcp_services.agent_grant_set(actor=system, server=twin, agent=agent)
    assert prompt_names(url, member) == ["summarize", "token_prompt", "summarize", "token_prompt"]
    clash = get(url, member, "summarize", {"topic": "x"})
    assert isinstance(clash, MCPError)
    assert clash.error.data["code"] == "conflict"
    assert "'plain'" in clash.error.message
    assert "'twin'" in clash.error.message


def test_a_viewer_lists_but_does_not_get_and_another_tenant_sees_nothing(base, tenant_a, tenant_b, granted):
    viewer = factories.make_api_key(tenant_a, Role.VIEWER)
    url = endpoint(base)
    assert prompt_names(url, viewer) == ["mcp_lib__summarize", "mcp_lib__token_prompt"]
    denied = get(url, viewer, "mcp_lib__summarize", {"topic": "x"})
    assert isinstance(denied, MCPError)
    assert denied.error.data["code"] == "permission_denied"

    b_agent = services.agent_create(actor=Actor.system(tenant_b), key="bot", name="Bot")
    outsider = factories.make_api_key(tenant_b, Role.OWNER)
    # Tenant B's agent has no grant of tenant A's server.
    assert prompt_names(url, outsider) == []
    missing = get(url, outsider, "mcp_lib__summarize", {"topic": "x"})
    assert isinstance(missing, MCPError)
    assert missing.error.data["code"] == "not_found"
    # A server of its own, of the same name, is tenant B's alone (here with prompts switched off).
    other = library(tenant_b)
    mcp_services.agent_grant_set(actor=Actor.system(tenant_b), server=other, agent=b_agent, prompts=False)
    assert prompt_names(url, outsider) == []
    assert not ToolCall.objects.for_tenant(tenant_a).exists()


# --- content of tool results ---------------------------------------------------------------------------


def test_a_tools_every_kind_of_content_reaches_the_client_block_by_block_scrubbed(
    base, tenant_a, agent, member
):
    demo = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="demo",
        transport="stdio",
        command=sys.executable,
        args=[str(DEMO), "stdio"],
        env={"TOKEN": TOKEN},
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=demo, agent=agent)
    # The tool as discovery stores it (discovery itself runs in a worker, which this test does not start).
    schema = {"type": "object", "properties": {"env_name": {"type": "string"}}}
    MCPServerTool.objects.create(tenant=tenant_a, server=demo, name="kinds", input_schema=schema)

    async def go() -> types.CallToolResult:
        async with session(endpoint(base), member, read_timeout=120) as client:
            return await client.call_tool("mcp_demo__kinds", {"env_name": "TOKEN"})

    result = asyncio.run(go())
    assert not result.is_error
    text, audio, notes, pixel, link = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == "one of each kind"
    assert isinstance(audio, types.AudioContent)
    assert audio.mime_type == "audio/wav"
    assert isinstance(notes, types.EmbeddedResource)
    assert isinstance(notes.resource, types.TextResourceContents)
    assert (str(notes.resource.uri), notes.resource.text) == ("demo://notes", "notes: [REDACTED]")
    assert isinstance(pixel, types.EmbeddedResource)
    assert isinstance(pixel.resource, types.BlobResourceContents)
    assert pixel.resource.blob == PIXEL
    assert isinstance(link, types.ResourceLink)
    assert (str(link.uri), link.name, link.description) == ("demo://later", "later", "read it later")
    assert TOKEN not in result.model_dump_json()


@pytest.mark.usefixtures("mcp_connections")
def test_a_tools_title_output_schema_and_annotations_are_listed_and_its_structured_result_checked(
    base, tenant_a, agent, member
):
    demo = mcp_services.server_create(
        actor=Actor.system(tenant_a),
        name="demo",
        transport="stdio",
        command=sys.executable,
        args=[str(DEMO), "stdio"],
    )
    mcp_services.agent_grant_set(actor=Actor.system(tenant_a), server=demo, agent=agent)
    mcp_client.refresh(demo)  # discovery, as the worker runs it
    stored = MCPServerTool.objects.for_tenant(tenant_a).get(server=demo, name="add")
    assert stored.title == "Adder"
    assert stored.annotations == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    assert (stored.output_schema or {}).get("required") == ["total", "terms"]

    async def go() -> tuple[list[types.Tool], types.CallToolResult]:
        async with session(endpoint(base), member, read_timeout=120) as client:
            listed = (await client.list_tools()).tools
            # The SDK's client checks the structured result against the listed output schema.
            return listed, await client.call_tool("mcp_demo__add", {"a": 2, "b": 3})

    listed, result = asyncio.run(go())
    add = next(tool for tool in listed if tool.name == "mcp_demo__add")
    assert add.title == "Adder"
    assert add.output_schema == stored.output_schema
    assert add.annotations is not None
    assert (add.annotations.read_only_hint, add.annotations.open_world_hint) == (True, False)
    echo = next(tool for tool in listed if tool.name == "mcp_demo__echo")
    assert (echo.title, echo.output_schema, echo.annotations) == (None, stored_output(tenant_a, "echo"), None)
    assert not result.is_error
    assert result.structured_content == {"total": 5, "terms": [2, 3]}
    with rest(base, member) as http:
        rest_tools = http.get("/api/v1/agents/bot/tools", params={"format": "mcp"}).json()["tools"]
    assert next(t for t in rest_tools if t["name"] == "mcp_demo__add")["annotations"]["readOnlyHint"] is True


def stored_output(tenant: Tenant, name: str) -> Any:
    return MCPServerTool.objects.for_tenant(tenant).get(name=name).output_schema
