"""Dashboard routes of teams: the list and settings, the live board, task detail, escalations, audit log."""

from django.urls import URLPattern, path

from apps.dashboard.views import teams

TASK = "teams/<uuid:id>/tasks/<uuid:task_id>/"
ESCALATION = "teams/<uuid:id>/escalations/<uuid:escalation_id>/"

urlpatterns: list[URLPattern] = [
    path("teams/", teams.team_list, name="teams"),
    path("teams/new/", teams.team_create, name="team_create"),
    path("teams/escalations/", teams.escalations_all, name="escalations"),
    path("teams/<uuid:id>/", teams.team_board, name="team_board"),
    path("teams/<uuid:id>/settings/", teams.team_settings, name="team_settings"),
    path("teams/<uuid:id>/members/add/", teams.team_member_add, name="team_member_add"),
    path("teams/<uuid:id>/members/<str:key>/remove/", teams.team_member_remove, name="team_member_remove"),
    path("teams/<uuid:id>/archive/", teams.team_archive, name="team_archive"),
    path("teams/<uuid:id>/tasks/new/", teams.task_create, name="team_task_create"),
    path(TASK, teams.task_detail, name="team_task"),
    path(TASK + "assign/", teams.task_assign, name="team_task_assign"),
    path(TASK + "cancel/", teams.task_cancel, name="team_task_cancel"),
    path(TASK + "retry/", teams.task_retry, name="team_task_retry"),
    path(TASK + "approve/", teams.task_approve, name="team_task_approve"),
    path(TASK + "reject/", teams.task_reject, name="team_task_reject"),
    path(TASK + "comment/", teams.task_comment, name="team_task_comment"),
    path("teams/<uuid:id>/escalations/", teams.escalation_inbox, name="team_escalations"),
    path(ESCALATION + "retry/", teams.escalation_retry, name="team_escalation_retry"),
    path(ESCALATION + "resolve/", teams.escalation_resolve, name="team_escalation_resolve"),
    path("teams/<uuid:id>/audit/", teams.team_audit, name="team_audit"),
]
