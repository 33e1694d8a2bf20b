"""Routes of the sessions API (/api/v1/sessions/...)."""

from django.urls import URLPattern, path

from apps.sessions.api import views

urlpatterns: list[URLPattern] = [
    path("sessions/", views.SessionViewSet.as_view({"get": "list", "post": "create"}), name="session-list"),
    path(
        "sessions/<str:pk>/",
        views.SessionViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="session-detail",
    ),
    path(
        "sessions/<str:pk>/messages/",
        views.SessionViewSet.as_view({"get": "messages", "post": "messages"}),
        name="session-message-list",
    ),
]
