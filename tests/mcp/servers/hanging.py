"""An MCP server made with the SDK that can be made to hang, for tests: ``python hanging.py stdio``.

``freeze`` stops the whole server process (SIGSTOP): from then on it answers nothing, not even pings,
as a server stuck in a deadlock or a blocking call would. ``echo`` answers while it is not frozen.
"""

from __future__ import annotations

import os
import signal

from mcp.server.mcpserver import MCPServer

server = MCPServer("hanging")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Stop this server process: it hangs and answers nothing more.")
def freeze() -> str:
    os.kill(os.getpid(), signal.SIGSTOP)
    return "thawed"


if __name__ == "__main__":
    server.run("stdio")
