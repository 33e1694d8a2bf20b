"""Routes of the teams API (teams, members, tasks and their actions, escalations, team events)."""

from django.urls import URLPattern, path

from apps.teams.api import views

TASK = "teams/<uuid:pk>/tasks/<uuid:task_id>"


def _task_action(name: str) -> URLPattern:
    return path(f"{TASK}/{name}", views.TaskViewSet.as_view({"post": name}), name=f"team-task-{name}")


urlpatterns: list[URLPattern] = [
    path("teams/", views.TeamViewSet.as_view({"get": "list", "post": "create"}), name="team-list"),
    path(
        "teams/<uuid:pk>/",
        views.TeamViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="team-detail",
    ),
    path(
        "teams/<uuid:pk>/members/",
        views.TeamMemberViewSet.as_view({"get": "list", "post": "create"}),
        name="team-member-list",
    ),
    path(
        "teams/<uuid:pk>/members/<str:key>/",
        views.TeamMemberViewSet.as_view({"delete": "destroy"}),
        name="team-member-detail",
    ),
    path(
        "teams/<uuid:pk>/tasks/",
        views.TaskViewSet.as_view({"get": "list", "post": "create"}),
        name="team-task-list",
    ),
    path(
        f"{TASK}/",
        views.TaskViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="team-task-detail",
    ),
    *(_task_action(name) for name in ("assign", "cancel", "retry", "approve", "reject", "comment")),
    path(
        "teams/<uuid:pk>/escalations/",
        views.EscalationViewSet.as_view({"get": "list"}),
        name="team-escalation-list",
    ),
    path(
        "teams/<uuid:pk>/escalations/<uuid:escalation_id>/resolve",
        views.EscalationViewSet.as_view({"post": "resolve"}),
        name="team-escalation-resolve",
    ),
    path("teams/<uuid:pk>/events/", views.TaskEventViewSet.as_view({"get": "list"}), name="team-event-list"),
    path(
        "teams/<uuid:pk>/grants/",
        views.TeamGrantViewSet.as_view({"get": "list", "post": "create"}),
        name="team-grant-list",
    ),
    path(
        "teams/<uuid:pk>/grants/<uuid:grant_id>/",
        views.TeamGrantViewSet.as_view({"delete": "destroy"}),
        name="team-grant-detail",
    ),
]
