"""An MCP server with resources one can subscribe to, made with the SDK's low-level server, for the
tests: ``watch://a`` and ``watch://b``; ``resources/subscribe`` and ``resources/unsubscribe``; the tool
``touch`` changes a resource and sends ``notifications/resources/updated`` when it is subscribed; the
tool ``watching`` lists the subscribed URIs. ``python watched.py`` (stdio)."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

Ctx = ServerRequestContext[Any, Any]
RESOURCES = ("watch://a", "watch://b")
VERSIONS = dict.fromkeys(RESOURCES, 0)
SUBSCRIBED: set[str] = set()
TOOLS = [
    types.Tool(
        name="touch",
        description="Change a resource (and tell its subscribers).",
        input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    ),
    types.Tool(
        name="watching",
        description="The URIs subscribed to.",
        input_schema={"type": "object", "properties": {}},
    ),
]


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "touch":
        uri = str((params.arguments or {}).get("uri", ""))
        VERSIONS[uri] = VERSIONS.get(uri, 0) + 1
        if uri in SUBSCRIBED:
            await ctx.session.send_resource_updated(uri)
        return types.CallToolResult(content=[types.TextContent(text=f"{uri} is now {VERSIONS[uri]}")])
    return types.CallToolResult(content=[types.TextContent(text=" ".join(sorted(SUBSCRIBED)))])


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri=uri, name=uri.removeprefix("watch://")) for uri in RESOURCES]
    )


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    text = f"{uri} version {VERSIONS.get(uri, 0)}"
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text)])


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


def build() -> Server[Any]:
    return Server(
        "watched",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_stdio)
