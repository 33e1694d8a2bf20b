"""Dashboard routes of agents' context files."""

from django.urls import URLPattern, path

from apps.dashboard.views import context_files

FILES = "agents/<str:key>/context-files/"

urlpatterns: list[URLPattern] = [
    path(FILES, context_files.file_list, name="context_files"),
    path(f"{FILES}<str:name>/", context_files.file_detail, name="context_file"),
    path(f"{FILES}<str:name>/save/", context_files.file_save, name="context_file_save"),
    path(f"{FILES}<str:name>/delete/", context_files.file_delete, name="context_file_delete"),
    path(
        f"{FILES}users/<str:user_id>/bootstrap/reset/",
        context_files.bootstrap_reset,
        name="context_file_bootstrap_reset",
    ),
    path(
        f"{FILES}users/<str:user_id>/<str:name>/delete/",
        context_files.user_file_delete,
        name="context_file_user_delete",
    ),
]
