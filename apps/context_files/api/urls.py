"""Routes of the context files API."""

from django.urls import URLPattern, path

from apps.context_files.api import views

FILES = "agents/<str:key>/context-files/"

urlpatterns: list[URLPattern] = [
    path(FILES, views.AgentFilesView.as_view(), name="context-file-list"),
    path(f"{FILES}users/<str:user_id>/", views.UserFilesView.as_view(), name="context-file-user-list"),
    path(
        f"{FILES}users/<str:user_id>/bootstrap",
        views.BootstrapView.as_view(),
        name="context-file-user-bootstrap",
    ),
    path(
        f"{FILES}users/<str:user_id>/<str:name>",
        views.UserFileView.as_view(),
        name="context-file-user-detail",
    ),
    path(f"{FILES}<str:name>", views.AgentFileView.as_view(), name="context-file-detail"),
]
