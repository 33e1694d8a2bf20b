"""Dashboard routes of runs, sessions and scheduled jobs."""

from django.urls import URLPattern, path

from apps.dashboard.views import runs

urlpatterns: list[URLPattern] = [
    path("runs/", runs.run_list, name="runs"),
    path("runs/<uuid:id>/", runs.run_detail, name="runs_detail"),
    path("runs/<uuid:id>/cancel/", runs.run_cancel, name="runs_cancel"),
    path("sessions/", runs.session_list, name="runs_sessions"),
    path("sessions/<uuid:id>/", runs.session_detail, name="runs_session"),
    path("sessions/<uuid:id>/archive/", runs.session_archive, name="runs_session_archive"),
    path("sessions/<uuid:id>/unarchive/", runs.session_unarchive, name="runs_session_unarchive"),
    path("sessions/<uuid:id>/delete/", runs.session_delete, name="runs_session_delete"),
    path("cron/", runs.cron_list, name="cron"),
    path("cron/new/", runs.cron_create, name="cron_create"),
    path("cron/<uuid:id>/", runs.cron_detail, name="cron_job"),
    path("cron/<uuid:id>/edit/", runs.cron_edit, name="cron_edit"),
    path("cron/<uuid:id>/enabled/", runs.cron_enabled, name="cron_enabled"),
    path("cron/<uuid:id>/run/", runs.cron_run, name="cron_run"),
    path("cron/<uuid:id>/delete/", runs.cron_delete, name="cron_delete"),
]
