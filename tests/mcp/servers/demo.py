"""A small MCP server made with the SDK, for tests and benchmarks.

``python demo.py stdio`` or ``python demo.py sse|streamable-http HOST PORT``. Its state (a counter) lives
in the process, so two connections to two processes count separately.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import socket
import sys

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel

server = MCPServer("demo")
_count = 0

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


# A WAV header with no samples.
SILENCE = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(
    description="Add two integers; structured result.",
    title="Adder",
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
def add(a: int, b: int) -> Sum:
    return Sum(total=a + b, terms=[a, b])


@server.tool(description="Count calls made to this server process.")
def counter() -> str:
    global _count
    _count += 1
    return str(_count)


# Unique per server process: its pid inside a jail (a pid namespace of its own) is the same small
# number for every server, so the identity adds a random part.
IDENTITY = f"{os.getpid()}-{secrets.token_hex(6)}"


@server.tool(description="This server process's identity (its pid and a random part).")
def pid() -> str:
    return IDENTITY


@server.tool(
    description="What the server process sees at a path: a directory's names, a file's text, or the error."
)
def probe(path: str) -> str:
    try:
        if os.path.isdir(path):
            return "\n".join(sorted(os.listdir(path)))
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(100_000)
    except OSError as error:
        return f"error: {error.strerror}"


@server.tool(description="The server process's user id, and whether it can reach host:port over TCP.")
def whoami(host: str = "", port: int = 0) -> str:
    reached = "no"
    if host and port:
        try:
            socket.create_connection((host, port), timeout=2).close()
            reached = "yes"
        except OSError as error:
            reached = f"no ({error.strerror or error})"
    return f"uid={os.getuid()} reached={reached}"


@server.tool(description="The address and port the HTTP request came from (its connection); stdio: none.")
def peer(ctx: Context) -> str:
    request = ctx.request_context.request
    client = getattr(request, "client", None)
    return f"{client.host}:{client.port}" if client else "none"


@server.tool(description="Wait, then answer.")
async def sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Fail with a message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="A tiny image.")
def pixel() -> Image:
    return Image(data=PIXEL, format="png")


@server.tool(description="Text and an image in one result.")
def captioned(caption: str) -> list[str | Image]:
    return [caption, Image(data=PIXEL, format="png")]


@server.tool(description="One block of each kind: text, audio, an embedded text and binary resource, a link.")
def kinds(env_name: str = "") -> list[types.ContentBlock]:
    secret = os.environ.get(env_name, "") if env_name else ""
    return [
        types.TextContent(text="one of each kind"),
        types.AudioContent(data=base64.b64encode(SILENCE).decode(), mime_type="audio/wav"),
        types.EmbeddedResource(
            resource=types.TextResourceContents(
                uri="demo://notes", mime_type="text/plain", text=f"notes: {secret}"
            )
        ),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(
                uri="demo://pixel", mime_type="image/png", blob=base64.b64encode(PIXEL).decode()
            )
        ),
        types.ResourceLink(
            uri="demo://later", name="later", description="read it later", mime_type="text/plain"
        ),
    ]


@server.tool(description="Report progress and log at three levels while it runs; the messages name a secret.")
async def chatty(ctx: Context, steps: int = 3, env_name: str = "") -> str:
    secret = os.environ.get(env_name, "") if env_name else ""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps} with {secret}")
    await ctx.debug(f"debug detail {secret}", logger_name="demo")
    await ctx.info({"event": "halfway", "secret": secret}, logger_name="demo")
    await ctx.warning(f"careful with {secret}", logger_name="demo")
    return f"done in {steps} steps"


class Name(BaseModel):
    name: str


@server.tool(description="Ask the user for a name (elicitation); the question names a secret.")
async def ask_name(ctx: Context, env_name: str = "") -> str:
    secret = os.environ.get(env_name, "") if env_name else ""
    answer = await ctx.elicit(f"Your name, please ({secret})", schema=Name)
    if answer.action == "accept" and answer.data is not None:
        return f"hello {answer.data.name}"
    return f"no name: {answer.action}"


@server.tool(description="Ask the client's model for a haiku (sampling).")
async def sample(ctx: Context, topic: str) -> str:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=f"A haiku about {topic}"))
    result = await ctx.session.create_message(  # type: ignore[call-overload]
        [message], max_tokens=50, related_request_id=ctx.request_id
    )
    return f"model said: {getattr(result.content, 'text', '')}"


@server.tool(description="The value of an environment variable of the server process.")
def env(name: str) -> str:
    return os.environ.get(name, "")


@server.tool(description="The length of an environment variable's value (0 when unset).")
def env_length(name: str) -> str:
    return str(len(os.environ.get(name, "")))


@server.tool(description="Optional arguments: says which were sent.")
def options(required: str, flag: bool | None = None, note: str | None = None) -> str:
    sent = [k for k, v in (("flag", flag), ("note", note)) if v is not None]
    return f"{required}; sent: {','.join(sent) or 'none'}"


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
        return
    host, port = sys.argv[2], int(sys.argv[3])
    if transport == "sse":
        server.run("sse", host=host, port=port)
    else:
        server.run("streamable-http", host=host, port=port)


if __name__ == "__main__":
    main()
