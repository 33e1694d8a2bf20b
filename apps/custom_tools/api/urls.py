"""Routes of the custom tools API."""

from django.urls import URLPattern, path

from apps.custom_tools.api import views

TOOL = "custom-tools/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path(
        "custom-tools/",
        views.CustomToolViewSet.as_view({"get": "list", "post": "create"}),
        name="custom-tool-list",
    ),
    path(
        f"{TOOL}/",
        views.CustomToolViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="custom-tool-detail",
    ),
    path(f"{TOOL}/test", views.CustomToolViewSet.as_view({"post": "test"}), name="custom-tool-test"),
]
