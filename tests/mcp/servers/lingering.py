"""A streamable-HTTP MCP server that keeps every answer's event stream open after the answer.

``python lingering.py streamable-http HOST PORT``. Written on asyncio's streams, not with the SDK (whose
server ends the stream after the answer, as it should): it answers ``initialize``, ``tools/list`` and
``tools/call`` with one event each and then sends nothing more until the client goes away. Its tools:
``echo`` and ``connections`` (how many client connections are open at that moment).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

SUPPORTED = ("2025-11-25", "2025-06-18")
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "connections", "description": "Open client connections.", "inputSchema": {"type": "object"}},
]
_open = 0


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion")
        result: dict[str, Any] = {
            "protocolVersion": version if version in SUPPORTED else SUPPORTED[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "lingering", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") in ("echo", "connections"):
        text = str(params.get("arguments", {}).get("text", "")) if params["name"] == "echo" else str(_open)
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": "Method not found"},
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global _open
    _open += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            if method != "POST":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            message = json.loads(body)
            if "id" not in message:  # a notification
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            event = f"event: message\r\ndata: {json.dumps(_answer(message))}\r\n\r\n".encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                b"mcp-session-id: lingering\r\n\r\n" + f"{len(event):x}\r\n".encode() + event + b"\r\n"
            )
            await writer.drain()
            await reader.read()  # the stream stays open until the client closes the connection
            return
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        _open -= 1
        writer.close()


async def main(host: str, port: int) -> None:
    server = await asyncio.start_server(_serve, host, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[2], int(sys.argv[3])))
