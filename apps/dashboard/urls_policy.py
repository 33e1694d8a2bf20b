"""Dashboard routes of the policy editor (tenant, agent, channel group), its live explain and versions."""

from django.urls import URLPattern, path

from apps.dashboard.views import policy

urlpatterns: list[URLPattern] = [
    path("policy/", policy.policy_tenant, name="policy_tenant"),
    path("policy/save/", policy.policy_tenant_save, name="policy_tenant_save"),
    path("policy/delete/", policy.policy_tenant_delete, name="policy_tenant_delete"),
    path("policy/versions/", policy.policy_tenant_versions, name="policy_tenant_versions"),
    path("policy/explain/", policy.policy_explain, name="policy_explain"),
    path("policy/agents/<str:key>/", policy.policy_agent, name="policy_agent"),
    path("policy/agents/<str:key>/save/", policy.policy_agent_save, name="policy_agent_save"),
    path("policy/agents/<str:key>/delete/", policy.policy_agent_delete, name="policy_agent_delete"),
    path("policy/agents/<str:key>/versions/", policy.policy_agent_versions, name="policy_agent_versions"),
    path("policy/channels/", policy.policy_channels, name="policy_channels"),
    path("policy/channels/<str:channel>/", policy.policy_channel, name="policy_channel"),
    path("policy/channels/<str:channel>/save/", policy.policy_channel_save, name="policy_channel_save"),
    path("policy/channels/<str:channel>/delete/", policy.policy_channel_delete, name="policy_channel_delete"),
    path(
        "policy/channels/<str:channel>/versions/",
        policy.policy_channel_versions,
        name="policy_channel_versions",
    ),
    path("policy/version/<uuid:id>/", policy.policy_version, name="policy_version"),
    path(
        "policy/version/<uuid:id>/rollback/", policy.policy_version_rollback, name="policy_version_rollback"
    ),
]
