"""An MCP server of the 2026-07-28 era only, made with the SDK's low-level server, for the tests: it
refuses the ``initialize`` handshake (``-32022``, naming 2026-07-28) and answers ``server/discover``.
Tools: ``echo``; ``chatty`` (progress, and log messages at the level the request's ``_meta`` asks
for); ``ask_name`` (elicitation, the 2026-07-28 way: an ``InputRequiredResult``, then the retried call
with the answer). A resource ``modern://greeting`` and a prompt ``greet`` that ask for a name the same
way before answering (``name: <accepted name>`` or ``no name: <action>``). ``python modern.py``
(stdio)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

Ctx = ServerRequestContext[Any, Any]
OBJECT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS = [
    types.Tool(name="echo", description="Echo the text back.", input_schema=OBJECT),
    types.Tool(name="chatty", description="Progress and logs.", input_schema=OBJECT),
    types.Tool(name="ask_name", description="Ask the user for a name.", input_schema=OBJECT),
]


async def refuse_handshake(ctx: Ctx, call_next: Any) -> Any:
    if ctx.method == "initialize":
        requested = str((ctx.params or {}).get("protocolVersion", ""))
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message="This server speaks protocol 2026-07-28 only.",
            data={"supported": ["2026-07-28"], "requested": requested},
        )
    return await call_next(ctx)


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
    text = str((params.arguments or {}).get("text", ""))
    if params.name == "echo":
        return _text(f"{ctx.protocol_version}: {text}")
    if params.name == "chatty":
        for step in (1, 2):  # to the request's progress token, when it has one
            await ctx.session.report_progress(step, 2, f"step {step}")
        for level in ("info", "error"):  # at the level the request's _meta asks for, and above
            await ctx.session.send_log_message(
                level, f"{level} {text}", "modern", related_request_id=ctx.request_id
            )
        return _text("chatted")
    answers = params.input_responses or {}
    answer = answers.get("name")
    if answer is None:
        question = types.ElicitRequestFormParams(
            message=f"Your name, please ({text})",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        )
        return types.InputRequiredResult(input_requests={"name": types.ElicitRequest(params=question)})
    if isinstance(answer, types.ElicitResult) and answer.action == "accept" and answer.content:
        return _text(f"hello {answer.content.get('name')}")
    return _text(f"no name: {getattr(answer, 'action', 'none')}")


def _asked(answers: types.InputResponses | None, why: str) -> str | types.InputRequiredResult:
    """The name in ``answers``, or an ``InputRequiredResult`` asking for it (``why`` in the question)."""
    answer = (answers or {}).get("name")
    if answer is None:
        question = types.ElicitRequestFormParams(
            message=f"Your name, please ({why})",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        )
        return types.InputRequiredResult(input_requests={"name": types.ElicitRequest(params=question)})
    if isinstance(answer, types.ElicitResult) and answer.action == "accept" and answer.content:
        return f"name: {answer.content.get('name')}"
    return f"no name: {getattr(answer, 'action', 'none')}"


GREETING = "modern://greeting"


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=GREETING, name="greeting")])


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
    asked = _asked(params.input_responses, "resource")
    if not isinstance(asked, str):
        return asked
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=str(params.uri), mime_type="text/plain", text=asked)]
    )


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet", description="Greet by name.")])


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> Any:
    asked = _asked(params.input_responses, "prompt")
    if not isinstance(asked, str):
        return asked
    message = types.PromptMessage(role="user", content=types.TextContent(text=asked))
    return types.GetPromptResult(messages=[message])


def build() -> Server[Any]:
    server: Server[Any] = Server(
        "modern",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.middleware.append(refuse_handshake)
    return server


async def _stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_stdio)
