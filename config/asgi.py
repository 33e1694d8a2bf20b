"""ASGI entry point: HTTP through Django (``/mcp/<agent key>/`` through the MCP endpoint), websockets
through Channels."""

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from apps.runtime import quota_limits  # noqa: E402
from apps.runtime.mcp_endpoint import PATH_PATTERN, MCPEndpoint  # noqa: E402
from apps.runtime.routing import websocket_urlpatterns  # noqa: E402
from apps.tenants import metrics  # noqa: E402
from apps.tenants.authentication import tenant_of_recent_key  # noqa: E402

mcp_endpoint = MCPEndpoint()


def _over_quota(scope: dict[str, Any]) -> quota_limits.QuotaExceeded | None:
    """The refusal when the request's API key belongs to a tenant this process refused for its
    request quota a moment ago (``quota_limits.refused_early``): such a request is answered here, before
    a thread, a query or a key check is spent on it, so a tenant far over its quota cannot make the
    others queue behind its refusals. Anything not known for certain goes the full way."""
    if not scope["path"].startswith("/api/"):
        return None
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").strip().partition(" ")
            tenant_id = tenant_of_recent_key(raw.strip()) if scheme.lower() == "bearer" else None
            if tenant_id is None:
                return None
            return quota_limits.refused_early(tenant_id, "api_requests_per_minute")
    return None


async def _refuse(send: Any, refusal: quota_limits.QuotaExceeded) -> None:
    """The answer the REST API's error handler gives the same refusal: the envelope and Retry-After."""
    error = {
        "code": str(refusal.default_code),
        "message": str(refusal.detail),
        "details": refusal.envelope_details,
    }
    headers = [
        (b"content-type", b"application/json"),
        *((name.lower().encode(), value.encode()) for name, value in refusal.http_headers.items()),
    ]
    await send({"type": "http.response.start", "status": refusal.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": error}).encode()})


async def http_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    refusal = _over_quota(scope)
    if refusal is not None:
        await _refuse(send, refusal)
    elif PATH_PATTERN.match(scope["path"]):
        await metrics.timed_asgi(mcp_endpoint, "mcp/<agent>/", scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
