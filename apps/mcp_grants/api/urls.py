"""Routes of the MCP API: servers, their tools, grants and users' credentials; access requests."""

from django.urls import URLPattern, path

from apps.mcp_grants.api import views

SERVER = "mcp/servers/<str:name>"
REQUEST = "mcp/requests/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path(
        "mcp/servers/", views.ServerViewSet.as_view({"get": "list", "post": "create"}), name="mcp-server-list"
    ),
    path(
        f"{SERVER}/",
        views.ServerViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="mcp-server-detail",
    ),
    path(f"{SERVER}/test", views.ServerConnectionViewSet.as_view({"post": "test"}), name="mcp-server-test"),
    path(
        f"{SERVER}/refresh",
        views.ServerConnectionViewSet.as_view({"post": "refresh"}),
        name="mcp-server-refresh",
    ),
    path(f"{SERVER}/tools/", views.ServerToolViewSet.as_view({"get": "list"}), name="mcp-server-tools"),
    path(f"{SERVER}/grants/", views.GrantListViewSet.as_view({"get": "list"}), name="mcp-grant-list"),
    path(
        f"{SERVER}/grants/agents/<str:key>/",
        views.AgentGrantViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="mcp-agent-grant",
    ),
    path(
        f"{SERVER}/grants/users/<str:user_id>/",
        views.UserGrantViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="mcp-user-grant",
    ),
    path(
        f"{SERVER}/credentials/", views.CredentialViewSet.as_view({"get": "list"}), name="mcp-credential-list"
    ),
    path(
        f"{SERVER}/credentials/<str:user_id>/",
        views.CredentialViewSet.as_view({"put": "update", "delete": "destroy"}),
        name="mcp-credential-detail",
    ),
    path(
        "agents/<str:key>/mcp-grants/",
        views.AgentMCPGrantViewSet.as_view({"get": "list"}),
        name="agent-mcp-grants",
    ),
    path(
        "mcp/requests/",
        views.RequestViewSet.as_view({"get": "list", "post": "create"}),
        name="mcp-request-list",
    ),
    path(f"{REQUEST}/", views.RequestViewSet.as_view({"get": "retrieve"}), name="mcp-request-detail"),
    path(f"{REQUEST}/approve", views.RequestViewSet.as_view({"post": "approve"}), name="mcp-request-approve"),
    path(f"{REQUEST}/reject", views.RequestViewSet.as_view({"post": "reject"}), name="mcp-request-reject"),
]
