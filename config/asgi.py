"""ASGI entry point: HTTP through Django (``/mcp/<agent key>/`` through the MCP endpoint), websockets
through Channels."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from apps.runtime.mcp_endpoint import PATH_PATTERN, MCPEndpoint  # noqa: E402
from apps.runtime.routing import websocket_urlpatterns  # noqa: E402
from apps.tenants import metrics  # noqa: E402

mcp_endpoint = MCPEndpoint()


async def http_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if PATH_PATTERN.match(scope["path"]):
        await metrics.timed_asgi(mcp_endpoint, "mcp/<agent>/", scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
