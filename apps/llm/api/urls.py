"""Routes of the providers API."""

from django.urls import URLPattern, path

from apps.llm.api import views

PROVIDER = "llm/providers/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path(
        "llm/providers/",
        views.ProviderViewSet.as_view({"get": "list", "post": "create"}),
        name="llm-provider-list",
    ),
    path(
        f"{PROVIDER}/",
        views.ProviderViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="llm-provider-detail",
    ),
    path(f"{PROVIDER}/test", views.ProviderViewSet.as_view({"post": "test"}), name="llm-provider-test"),
]
