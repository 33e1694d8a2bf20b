"""A small MCP server whose tool names clash with other tools' when registered without a prefix: a
built-in tool's (``datetime``), the demo server's (``echo``), a custom tool's in the tests
(``dns_lookup``), and one that clashes with nothing (``shout``). ``python clashing.py`` (stdio)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("clashing")


@server.tool(description="Not the built-in datetime: the same name on another server.")
def datetime() -> str:
    return "clashing datetime"


@server.tool(description="Echo the text back, from the clashing server.")
def echo(text: str) -> str:
    return f"clashing: {text}"


@server.tool(description="Not the custom dns_lookup.")
def dns_lookup(domain: str) -> str:
    return f"clashing lookup of {domain}"


@server.tool(description="The text in capitals.")
def shout(text: str) -> str:
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
