"""Routes of the sandbox API (/api/v1/sandbox/...)."""

from django.urls import URLPattern, path

from apps.sandbox.api import views

urlpatterns: list[URLPattern] = [
    path("sandbox/", views.SandboxView.as_view(), name="sandbox-status"),
    path(
        "sandbox/containers/",
        views.ContainerViewSet.as_view({"get": "list"}),
        name="sandbox-container-list",
    ),
    path(
        "sandbox/containers/<uuid:pk>/",
        views.ContainerViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="sandbox-container-detail",
    ),
]
