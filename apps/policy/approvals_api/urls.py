"""Routes of the exec-approvals API (pending approvals, decisions, allow-always rules)."""

from django.urls import URLPattern, path

from apps.policy.approvals_api import views

urlpatterns: list[URLPattern] = [
    path("approvals/", views.ApprovalViewSet.as_view({"get": "list"}), name="approval-list"),
    path(
        "approvals/<uuid:pk>/",
        views.ApprovalViewSet.as_view({"get": "retrieve"}),
        name="approval-detail",
    ),
    path("approvals/<uuid:pk>/decide", views.ApprovalDecideView.as_view(), name="approval-decide"),
    path("approval-rules/", views.ApprovalRuleViewSet.as_view({"get": "list"}), name="approval-rule-list"),
    path(
        "approval-rules/<uuid:pk>/",
        views.ApprovalRuleViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="approval-rule-detail",
    ),
]
