"""Dashboard routes of the approvals inbox and the allow-always rules."""

from django.urls import URLPattern, path

from apps.dashboard.views import approvals

urlpatterns: list[URLPattern] = [
    path("approvals/", approvals.approval_inbox, name="approvals"),
    path("approvals/count/", approvals.approval_count, name="approval_count"),
    path("approvals/rules/", approvals.rule_list, name="approval_rules"),
    path("approvals/rules/<uuid:id>/revoke/", approvals.rule_revoke, name="approval_rule_revoke"),
    path("approvals/<uuid:id>/decide/", approvals.approval_decide, name="approval_decide"),
    path("approvals/<uuid:id>/allow-always/", approvals.approval_allow_always, name="approval_allow_always"),
    path("approvals/<uuid:id>/deny/", approvals.approval_deny, name="approval_deny"),
]
