"""Routes of the memory API (/api/v1/agents/<key>/memory/...)."""

from django.urls import URLPattern, path

from apps.memory.api import views

urlpatterns: list[URLPattern] = [
    path("agents/<str:key>/memory-search", views.MemorySearchView.as_view(), name="agent-memory-search"),
    path(
        "agents/<str:key>/memory/",
        views.MemoryDocumentViewSet.as_view({"get": "list"}),
        name="agent-memory-list",
    ),
    path(
        "agents/<str:key>/memory/<path:path>",
        views.MemoryDocumentViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="agent-memory-detail",
    ),
]
