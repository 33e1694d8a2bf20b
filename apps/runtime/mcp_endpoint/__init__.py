"""Toolgate as an MCP server: ``/mcp/<agent key>/`` speaks MCP streamable HTTP (the SDK's transport,
stateless, so any daphne process serves any request).

* ``asgi``: the ASGI application in front of the SDK: the path, the API key (the REST API's
  authentication), the agent (404 when it is not the key's tenant's), the call scope from the query
  string, Host/Origin checks and the body limit, and the SDK's session manager for this event loop.
* ``server``: the MCP server itself: ``tools/list`` is the REST listing (``apps.policy.listing``) in its
  MCP form, ``tools/call`` runs the runtime pipeline like ``POST /api/v1/runtime/execute``, approval
  waits included.
"""

from apps.runtime.mcp_endpoint.asgi import PATH_PATTERN, MCPEndpoint

__all__ = ["PATH_PATTERN", "MCPEndpoint"]
