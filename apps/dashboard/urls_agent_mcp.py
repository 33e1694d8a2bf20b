"""Dashboard routes of an agent's MCP resources and prompts (under the agent, so the Agents section is
highlighted; not under ``/mcp/``, Toolgate's own MCP endpoint)."""

from django.urls import URLPattern, path

from apps.dashboard.views import agent_mcp

AGENT_MCP = "agents/<str:key>/mcp/"

urlpatterns: list[URLPattern] = [
    path(AGENT_MCP, agent_mcp.agent_mcp, name="agent_mcp"),
    path(f"{AGENT_MCP}read/", agent_mcp.agent_mcp_read, name="agent_mcp_read"),
    path(f"{AGENT_MCP}prompt/", agent_mcp.agent_mcp_prompt, name="agent_mcp_prompt"),
]
