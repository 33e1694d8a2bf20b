"""An MCP server with resources, prompts and completion (and no tools), made with the SDK, for the tests.

``python library.py stdio`` or ``python library.py streamable-http HOST PORT``. ``LIBRARY_TOKEN`` (from
the registration's environment) is its own secret: ``library://token`` shows it, so a test can check
that Toolgate scrubs a resource's text of the connection's secrets.
"""

from __future__ import annotations

import base64
import os
import sys

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage

server = MCPServer("library")

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@server.resource(
    "library://readme", name="readme", description="What this library holds.", mime_type="text/plain"
)
def readme() -> str:
    return "The library of the tests: books by id, a pixel, and a token."


@server.resource("library://token", name="token", mime_type="text/plain")
def token() -> str:
    return f"the token is {os.environ.get('LIBRARY_TOKEN', 'unset')}"


@server.resource("library://pixel", name="pixel", mime_type="image/png")
def pixel() -> bytes:
    return PIXEL


@server.resource("library://books/{book}", name="book", mime_type="text/plain")
def book(book: str) -> str:
    return f"Book {book}: once upon a time."


@server.resource("library://zeros/{size}", name="zeros", mime_type="application/octet-stream")
def zeros(size: str) -> bytes:
    return bytes(min(int(size), 64 * 1024 * 1024))


TOPICS = ["history", "horses", "hydrology", "poetry"]


@server.prompt(name="summarize", description="Summarize a topic.")
def summarize(topic: str, words: str = "50") -> str:
    return f"Summarize {topic} in {words} words."


@server.prompt(name="token_prompt", description="A prompt that shows the server's token.")
def token_prompt() -> list[Message]:
    return [
        UserMessage(content=types.TextContent(text=f"use {os.environ.get('LIBRARY_TOKEN')}")),
        AssistantMessage(
            content=types.ImageContent(data=base64.b64encode(PIXEL).decode(), mime_type="image/png")
        ),
    ]


@server.completion()
async def complete(ref, argument, context):  # type: ignore[no-untyped-def]
    if isinstance(ref, types.PromptReference) and ref.name == "summarize" and argument.name == "topic":
        return types.Completion(values=[t for t in TOPICS if t.startswith(argument.value)])
    if isinstance(ref, types.ResourceTemplateReference) and argument.name == "book":
        return types.Completion(values=[b for b in ("1", "12", "123", "7") if b.startswith(argument.value)])
    return None


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
        return
    server.run("streamable-http", host=sys.argv[2], port=int(sys.argv[3]))


if __name__ == "__main__":
    main()
