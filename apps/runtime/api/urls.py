from django.urls import path

from apps.runtime.api import mcp_views, quota, stats, views

urlpatterns = [
    path("runtime/execute", views.ExecuteView.as_view(), name="runtime-execute"),
    path("agents/<str:key>/tools", views.AgentToolsView.as_view(), name="agent-tools"),
    path("tools/catalog/", views.CatalogView.as_view(), name="tool-catalog"),
    path("tenant/quota", quota.TenantQuotaView.as_view(), name="tenant-quota"),
    path("stats/tool-calls", stats.ToolCallSeriesView.as_view(), name="stats-tool-calls"),
    path("stats/top", stats.ToolCallTopView.as_view(), name="stats-top"),
    path("stats/needs-you", stats.NeedsYouView.as_view(), name="stats-needs-you"),
    path(
        "agents/<str:key>/mcp/resources", mcp_views.AgentResourcesView.as_view(), name="agent-mcp-resources"
    ),
    path(
        "agents/<str:key>/mcp/resources/read",
        mcp_views.AgentResourceReadView.as_view(),
        name="agent-mcp-resource-read",
    ),
    path("agents/<str:key>/mcp/prompts", mcp_views.AgentPromptsView.as_view(), name="agent-mcp-prompts"),
    path(
        "agents/<str:key>/mcp/prompts/get",
        mcp_views.AgentPromptGetView.as_view(),
        name="agent-mcp-prompt-get",
    ),
]
