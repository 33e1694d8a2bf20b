"""An MCP server (made with the SDK) that answers with the ``_meta`` its ``tools/call`` request carried,
for the trace-propagation tests. ``python traced.py stdio``."""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("traced")


@server.tool(description="The _meta of this tools/call request, as JSON.")
def request_meta(ctx: Context) -> str:
    meta = ctx.request_context.meta or {}
    return json.dumps({str(k): v for k, v in dict(meta).items()}, default=str)


if __name__ == "__main__":
    server.run("stdio")
