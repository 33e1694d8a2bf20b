"""Dashboard routes of MCP servers, grants and access requests. None is under ``/mcp/``: that prefix is
Toolgate's own MCP endpoint (``/mcp/<agent key>/``)."""

from django.urls import URLPattern, path

from apps.dashboard.views import mcp

AGENT = {"kind": "agent"}
USER = {"kind": "user"}

urlpatterns: list[URLPattern] = [
    path("mcp-servers/", mcp.server_list, name="mcp_servers"),
    path("mcp-servers/new/", mcp.server_create, name="mcp_server_create"),
    path("mcp-servers/<uuid:id>/", mcp.server_detail, name="mcp_server"),
    path("mcp-servers/<uuid:id>/edit/", mcp.server_edit, name="mcp_server_edit"),
    path("mcp-servers/<uuid:id>/enabled/", mcp.server_enable, name="mcp_server_enable"),
    path("mcp-servers/<uuid:id>/delete/", mcp.server_delete, name="mcp_server_delete"),
    path("mcp-servers/<uuid:id>/credentials/new/", mcp.credential_edit, name="mcp_credential_create"),
    path(
        "mcp-servers/<uuid:id>/credentials/<str:user_id>/edit/",
        mcp.credential_edit,
        name="mcp_credential_edit",
    ),
    path(
        "mcp-servers/<uuid:id>/credentials/<str:user_id>/delete/",
        mcp.credential_delete,
        name="mcp_credential_delete",
    ),
    path("mcp-servers/<uuid:id>/test/", mcp.server_connect, {"store": False}, name="mcp_server_test"),
    path("mcp-servers/<uuid:id>/refresh/", mcp.server_connect, {"store": True}, name="mcp_server_refresh"),
    path("mcp-servers/<uuid:id>/agent-grants/new/", mcp.grant_create, AGENT, name="mcp_agent_grant_create"),
    path(
        "mcp-servers/<uuid:id>/agent-grants/<uuid:grant_id>/edit/",
        mcp.grant_edit,
        AGENT,
        name="mcp_agent_grant_edit",
    ),
    path(
        "mcp-servers/<uuid:id>/agent-grants/<uuid:grant_id>/enabled/",
        mcp.grant_enable,
        AGENT,
        name="mcp_agent_grant_enable",
    ),
    path(
        "mcp-servers/<uuid:id>/agent-grants/<uuid:grant_id>/delete/",
        mcp.grant_delete,
        AGENT,
        name="mcp_agent_grant_delete",
    ),
    path("mcp-servers/<uuid:id>/user-grants/new/", mcp.grant_create, USER, name="mcp_user_grant_create"),
    path(
        "mcp-servers/<uuid:id>/user-grants/<uuid:grant_id>/edit/",
        mcp.grant_edit,
        USER,
        name="mcp_user_grant_edit",
    ),
    path(
        "mcp-servers/<uuid:id>/user-grants/<uuid:grant_id>/enabled/",
        mcp.grant_enable,
        USER,
        name="mcp_user_grant_enable",
    ),
    path(
        "mcp-servers/<uuid:id>/user-grants/<uuid:grant_id>/delete/",
        mcp.grant_delete,
        USER,
        name="mcp_user_grant_delete",
    ),
    path("mcp-requests/", mcp.request_inbox, name="mcp_requests"),
    path("mcp-requests/<uuid:id>/", mcp.request_review, name="mcp_request_review"),
    path("mcp-requests/mine/", mcp.my_requests, name="mcp_my_requests"),
]
