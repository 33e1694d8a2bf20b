from django.urls import path

from apps.dashboard import (
    urls_approvals,
    urls_context_files,
    urls_custom_tools,
    urls_mcp,
    urls_memory,
    urls_policy,
    urls_sandbox,
    urls_secure_cli,
    urls_teams,
)
from apps.dashboard.views import agents, api_keys, audit, auth, home, members, runtime, tool_calls, tools

app_name = "dashboard"
urlpatterns = [
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth.logout_view, name="logout"),
    path("tenant/switch/", auth.switch_tenant, name="switch_tenant"),
    path("", home.home, name="home"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/new/", agents.agent_create, name="agent_create"),
    path("agents/<str:key>/edit/", agents.agent_edit, name="agent_edit"),
    path("agents/<str:key>/delete/", agents.agent_delete, name="agent_delete"),
    path("tools/", tools.tool_catalog, name="tools"),
    path("runtime/", runtime.runtime_settings, name="runtime_settings"),
    path("runtime/edit/", runtime.runtime_settings_edit, name="runtime_settings_edit"),
    path("runtime/reset/", runtime.runtime_settings_reset, name="runtime_settings_reset"),
    path("tool-calls/", tool_calls.tool_call_log, name="tool_calls"),
    path("api-keys/", api_keys.api_key_list, name="api_keys"),
    path("api-keys/new/", api_keys.api_key_create, name="api_key_create"),
    path("api-keys/<uuid:id>/revoke/", api_keys.api_key_revoke, name="api_key_revoke"),
    path("members/", members.member_list, name="members"),
    path("members/new/", members.member_add, name="member_add"),
    path("members/<uuid:id>/role/", members.member_role, name="member_role"),
    path("members/<uuid:id>/remove/", members.member_remove, name="member_remove"),
    path("audit/", audit.audit_log, name="audit"),
    *urls_policy.urlpatterns,
    *urls_approvals.urlpatterns,
    *urls_teams.urlpatterns,
    *urls_mcp.urlpatterns,
    *urls_custom_tools.urlpatterns,
    *urls_secure_cli.urlpatterns,
    *urls_sandbox.urlpatterns,
    *urls_context_files.urlpatterns,
    *urls_memory.urlpatterns,
]
