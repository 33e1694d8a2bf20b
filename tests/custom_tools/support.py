"""What the custom tools tests share: the seed's ``dns_lookup`` example, API shortcuts and a way to call
a tool as an agent loop does (``POST /api/v1/runtime/execute``)."""

from __future__ import annotations

from typing import Any

TOOLS = "/api/v1/custom-tools/"
EXECUTE = "/api/v1/runtime/execute"
SECRET = "s3cr3t-env-value-7d41c9"

# The seed's example, with a resolver every test machine has (getent reads /etc/hosts and NSS).
DNS_LOOKUP: dict[str, Any] = {
    "name": "dns_lookup",
    "description": "Look up the addresses of a host name.",
    "parameters": {
        "type": "object",
        "properties": {"domain": {"type": "string", "description": "the host name"}},
        "required": ["domain"],
    },
    "command": "getent hosts {{.domain}}",
    "timeout_seconds": 10,
}


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def execute(client: Any, agent: str, tool: str, args: dict[str, Any] | None = None, **context: Any) -> Any:
    """One call through the pipeline; the answer's body (HTTP 200 whatever the tool did)."""
    body = {"agent": agent, "tool": tool, "args": args or {}, "context": {"session_key": "s1", **context}}
    return ok(client.post(EXECUTE, body, format="json"))


def tool_definitions(client: Any, agent: str) -> dict[str, dict[str, Any]]:
    """The agent's tools as ``GET /api/v1/agents/<key>/tools`` lists them (OpenAI-free plain form)."""
    body = ok(client.get(f"/api/v1/agents/{agent}/tools?format=mcp"))
    return {tool["name"]: tool for tool in body["tools"]}
