"""Routes of the runs API."""

from django.urls import URLPattern, path

from apps.runs.api import views

urlpatterns: list[URLPattern] = [
    path("agents/<str:key>/runs", views.AgentRunsView.as_view(), name="agent-run-create"),
    path("runs/", views.RunViewSet.as_view({"get": "list"}), name="run-list"),
    path("runs/<str:pk>/", views.RunViewSet.as_view({"get": "retrieve"}), name="run-detail"),
    path("runs/<str:pk>/cancel", views.RunViewSet.as_view({"post": "cancel"}), name="run-cancel"),
    path("runs/<str:pk>/claim", views.RunViewSet.as_view({"post": "claim"}), name="run-claim"),
    path("runs/<str:pk>/finish", views.RunViewSet.as_view({"post": "finish"}), name="run-finish"),
    path("runs/<str:pk>/messages", views.RunViewSet.as_view({"post": "messages"}), name="run-messages"),
    path("cron/", views.CronJobViewSet.as_view({"get": "list", "post": "create"}), name="cron-job-list"),
    path(
        "cron/<str:pk>/",
        views.CronJobViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="cron-job-detail",
    ),
    path("cron/<str:pk>/run", views.CronJobViewSet.as_view({"post": "run_now"}), name="cron-job-run"),
    path("cron/<str:pk>/firings/", views.CronJobViewSet.as_view({"get": "firings"}), name="cron-job-firings"),
]
