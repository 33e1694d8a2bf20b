"""An MCP server made with the SDK with 45 tools, for MCP search mode (more than 40 tools).

``python many.py stdio``. Each tool says what it does in its description and answers its own name and
arguments."""

from __future__ import annotations

import json
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("many")

TOPICS = [
    ("convert_currency", "Convert an amount of money from one currency to another at today's rate."),
    ("weather_forecast", "Get the weather forecast for a city for the next days."),
    ("create_issue", "Open a new issue in the bug tracker with a title and a body."),
    ("send_invoice", "Send an invoice to a customer by email."),
    ("translate_text", "Translate text between languages."),
]
FILLER = [
    "Look up a record in archive {n}.",
    "Count the entries of ledger {n}.",
    "Summarise report number {n}.",
    "Check the status of job {n}.",
]


def _make(name: str, description: str) -> None:
    def tool(text: str = "") -> str:
        return json.dumps({"tool": name, "text": text})

    tool.__name__ = name
    server.tool(name=name, description=description)(tool)


for name, description in TOPICS:
    _make(name, description)
for n in range(40):
    _make(f"record_{n:02d}", FILLER[n % len(FILLER)].format(n=n))


if __name__ == "__main__":
    if sys.argv[1:] != ["stdio"]:
        raise SystemExit("usage: many.py stdio")
    server.run("stdio")
