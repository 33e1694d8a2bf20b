"""Routes of the policy API (documents, versions, explain, import/export)."""

from django.urls import URLPattern, path

from apps.policy.api import views

urlpatterns: list[URLPattern] = [
    path("policy/tenant/", views.TenantPolicyView.as_view(), name="policy-tenant"),
    path("policy/agents/<str:key>/", views.AgentPolicyView.as_view(), name="policy-agent"),
    path("policy/channels/", views.ChannelPolicyListView.as_view(), name="policy-channel-list"),
    path("policy/channels/<str:channel>/", views.ChannelPolicyView.as_view(), name="policy-channel"),
    path(
        "policy/versions/",
        views.PolicyVersionViewSet.as_view({"get": "list"}),
        name="policy-version-list",
    ),
    path(
        "policy/versions/<uuid:pk>/",
        views.PolicyVersionViewSet.as_view({"get": "retrieve"}),
        name="policy-version-detail",
    ),
    path(
        "policy/versions/<uuid:pk>/rollback",
        views.PolicyVersionRollbackView.as_view(),
        name="policy-version-rollback",
    ),
    path("policy/preview", views.PolicyPreviewView.as_view(), name="policy-preview"),
    path("policy/export", views.PolicyExportView.as_view(), name="policy-export"),
    path("agents/<str:key>/tools/explain", views.AgentToolsExplainView.as_view(), name="agent-tools-explain"),
]
