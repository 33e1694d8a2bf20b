"""Routes of the credentialed CLIs API."""

from django.urls import URLPattern, path

from apps.secure_cli.api import views

BINARY = "secure-cli/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path(
        "secure-cli/",
        views.BinaryViewSet.as_view({"get": "list", "post": "create"}),
        name="secure-cli-list",
    ),
    path("secure-cli/presets/", views.PresetViewSet.as_view({"get": "list"}), name="secure-cli-presets"),
    path(
        f"{BINARY}/",
        views.BinaryViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="secure-cli-detail",
    ),
    path(f"{BINARY}/test", views.BinaryTestViewSet.as_view({"post": "test"}), name="secure-cli-test"),
    path(f"{BINARY}/grants/", views.GrantViewSet.as_view({"get": "list"}), name="secure-cli-grant-list"),
    path(
        f"{BINARY}/grants/<str:key>/",
        views.GrantViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="secure-cli-grant",
    ),
    path(
        f"{BINARY}/credentials/",
        views.CredentialViewSet.as_view({"get": "list"}),
        name="secure-cli-credential-list",
    ),
    path(
        f"{BINARY}/credentials/<str:user_id>/",
        views.CredentialViewSet.as_view({"put": "update", "delete": "destroy"}),
        name="secure-cli-credential",
    ),
]
