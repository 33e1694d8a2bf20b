"""The reference server of the MCP conformance suite (@modelcontextprotocol/conformance), made with the SDK.

It implements every server scenario of the suite with the tool, resource and prompt names the scenarios call
(``test_simple_text``, ``test://static-text``, ``test_prompt_with_arguments``...), so the suite run against it
directly says what the SDK passes, and run through Toolgate what Toolgate's endpoint loses on the way.

``python conformance.py`` (stdio) or ``python conformance.py --http PORT`` (streamable HTTP on
127.0.0.1:PORT/mcp, with sessions and an in-memory event store so streams can be resumed).
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage

# A 1x1 red PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _wav() -> str:
    """A tenth of a second of silence: a valid 8 kHz mono 8-bit WAV."""
    samples = bytes([128]) * 800
    header = (
        b"RIFF"
        + (36 + len(samples)).to_bytes(4, "little")
        + b"WAVEfmt "
        + (16).to_bytes(4, "little")
        + (1).to_bytes(2, "little")  # PCM
        + (1).to_bytes(2, "little")  # mono
        + (8000).to_bytes(4, "little")
        + (8000).to_bytes(4, "little")
        + (1).to_bytes(2, "little")
        + (8).to_bytes(2, "little")
        + b"data"
        + len(samples).to_bytes(4, "little")
    )
    return base64.b64encode(header + samples).decode()


WAV = _wav()
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

Ctx = ServerRequestContext[Any, Any]
ToolFn = Callable[[Ctx, dict[str, Any]], Awaitable[list[types.ContentBlock]]]


class ToolFailed(Exception):
    """Raised by a tool to answer ``isError: true`` with the message."""


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


async def _log(ctx: Ctx, message: str) -> None:
    await ctx.session.send_log_message(
        "info", message, logger="conformance", related_request_id=ctx.request_id
    )


def _progress_token(ctx: Ctx) -> str | int | None:
    meta: Any = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


async def simple_text(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    return [_text("This is a simple text response for testing.")]


async def image_content(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    return [_image()]


async def audio_content(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


async def embedded_resource(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    resource = types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return [types.EmbeddedResource(type="resource", resource=resource)]


async def multiple_content_types(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    resource = types.TextResourceContents(
        uri="test://mixed-content-resource",
        mime_type="application/json",
        text=json.dumps({"test": "data", "value": 123}),
    )
    return [
        _text("Multiple content types test:"),
        _image(),
        types.EmbeddedResource(type="resource", resource=resource),
    ]


async def tool_with_logging(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    await _log(ctx, "Tool execution started")
    await anyio.sleep(0.05)
    await _log(ctx, "Tool processing data")
    await anyio.sleep(0.05)
    await _log(ctx, "Tool execution completed")
    return [_text("Tool with logging executed successfully")]


async def error_handling(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    raise ToolFailed("This tool intentionally returns an error for testing")


async def tool_with_progress(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    token = _progress_token(ctx)
    for step, value in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(0.05)
        if token is not None:
            await ctx.session.send_progress_notification(
                token, value, 100, related_request_id=str(ctx.request_id)
            )
    return [_text(f"Tool with progress executed successfully (progress token: {token})")]


async def sampling(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    prompt = str(args.get("prompt", ""))
    message = types.SamplingMessage(role="user", content=_text(prompt))
    result = await ctx.session.create_message([message], max_tokens=100, related_request_id=ctx.request_id)  # type: ignore[call-overload]
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else str(content)
    return [_text(f"LLM response: {text}")]


async def _elicit(ctx: Ctx, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


async def elicitation(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await _elicit(ctx, str(args.get("message", "")), schema)
    return [_text(f"User response: action={result.action}, content={json.dumps(result.content)}")]


async def elicitation_sep1034_defaults(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    result = await _elicit(ctx, "Please review and update the form fields with defaults", schema)
    return [_text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]


async def elicitation_sep1330_enums(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    result = await _elicit(ctx, "Please choose from the enum fields", schema)
    return [_text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]


async def json_schema_2020_12(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    return [_text(f"Received: {json.dumps(args, sort_keys=True)}")]


async def reconnection(ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
    # Closes this request's SSE stream mid-call (when the transport resumes streams), so the client has to
    # reconnect with Last-Event-ID to get the result.
    await anyio.sleep(0.1)
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    return [_text("Reconnection test completed successfully")]


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

TOOLS: dict[str, tuple[str, dict[str, Any], ToolFn]] = {
    "test_simple_text": ("Returns simple text content.", NO_ARGS, simple_text),
    "test_image_content": ("Returns a PNG image.", NO_ARGS, image_content),
    "test_audio_content": ("Returns a WAV sound.", NO_ARGS, audio_content),
    "test_embedded_resource": ("Returns an embedded text resource.", NO_ARGS, embedded_resource),
    "test_multiple_content_types": (
        "Returns text, an image and a resource.",
        NO_ARGS,
        multiple_content_types,
    ),
    "test_tool_with_logging": ("Sends three log messages while it runs.", NO_ARGS, tool_with_logging),
    "test_error_handling": ("Always fails with isError.", NO_ARGS, error_handling),
    "test_tool_with_progress": ("Reports progress 0, 50, 100 of 100.", NO_ARGS, tool_with_progress),
    "test_sampling": (
        "Asks the client's model to answer a prompt (sampling).",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"],
        },
        sampling,
    ),
    "test_elicitation": (
        "Asks the user for a username and an email (elicitation).",
        {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"],
        },
        elicitation,
    ),
    "test_elicitation_sep1034_defaults": (
        "Elicitation with a default for each primitive type (SEP-1034).",
        NO_ARGS,
        elicitation_sep1034_defaults,
    ),
    "test_elicitation_sep1330_enums": (
        "Elicitation with the five enum forms (SEP-1330).",
        NO_ARGS,
        elicitation_sep1330_enums,
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features",
        JSON_SCHEMA_2020_12,
        json_schema_2020_12,
    ),
    "test_reconnection": ("Closes its SSE stream mid-call, then answers.", NO_ARGS, reconnection),
}


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=name, description=description, input_schema=schema)
            for name, (description, schema, _) in TOOLS.items()
        ]
    )


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    entry = TOOLS.get(params.name)
    if entry is None:
        return types.CallToolResult(content=[_text(f"Unknown tool: {params.name}")], is_error=True)
    try:
        content = await entry[2](ctx, dict(params.arguments or {}))
    except ToolFailed as error:
        return types.CallToolResult(content=[_text(str(error))], is_error=True)
    return types.CallToolResult(content=content)


STATIC_TEXT = "This is the content of the static text resource."
STATIC_BINARY = base64.b64decode(PNG)
RESOURCES = [
    types.Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    ),
    types.Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (a PNG image)",
        mime_type="image/png",
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource clients can subscribe to",
        mime_type="text/plain",
    ),
]
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_resource_templates(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        description="A resource template with an id parameter",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: list[types.TextResourceContents | types.BlobResourceContents]
    if uri == "test://static-text":
        contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)]
    elif uri == "test://static-binary":
        blob = base64.b64encode(STATIC_BINARY).decode()
        contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=blob)]
    elif uri == "test://watched-resource":
        contents = [
            types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")
        ]
    elif uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
        text = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
        contents = [types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    else:
        raise ValueError(f"Unknown resource: {uri}")
    return types.ReadResourceResult(contents=contents)


SUBSCRIPTIONS: set[str] = set()


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.discard(str(params.uri))
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[
            types.PromptArgument(name="resourceUri", description="URI of the resource", required=True)
        ],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = dict(params.arguments or {})
    if params.name == "test_simple_prompt":
        messages = [_user(_text("This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
        messages = [_user(_text(text))]
    elif params.name == "test_prompt_with_embedded_resource":
        uri = args.get("resourceUri", "test://example-resource")
        resource = types.TextResourceContents(
            uri=uri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        messages = [
            _user(types.EmbeddedResource(type="resource", resource=resource)),
            _user(_text("Please process the embedded resource above.")),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [_user(_image()), _user(_text("Please analyze the image above."))]
    else:
        raise ValueError(f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    prefix = params.argument.value
    values = [v for v in ("paris", "park", "party", "test-value") if v.startswith(prefix)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


LOG_LEVEL: list[str] = ["info"]


async def set_logging_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    LOG_LEVEL[0] = params.level
    return types.EmptyResult()


def build() -> Server[Any]:
    return Server(
        "mcp-conformance-reference",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_logging_level,
    )


class MemoryEventStore(EventStore):
    """Keeps every event of the process, so a client can resume any stream with Last-Event-ID."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._events: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        del self._events[:-10_000]
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in list(self._events):
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _http(port: int) -> None:
    import uvicorn

    app = build().streamable_http_app(event_store=MemoryEventStore(), retry_interval=500, host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    args = parser.parse_args()
    if args.http:
        _http(args.http)
    else:
        anyio.run(_stdio)


if __name__ == "__main__":
    main()
