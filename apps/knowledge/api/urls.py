"""Routes of the knowledge API (/api/v1/agents/<key>/knowledge/...)."""

from django.urls import URLPattern, path

from apps.knowledge.api import views

GRAPH = "agents/<str:key>/knowledge/"

urlpatterns: list[URLPattern] = [
    path(
        f"{GRAPH}entities/",
        views.EntityViewSet.as_view({"get": "list", "post": "create"}),
        name="knowledge-entity-list",
    ),
    path(
        f"{GRAPH}entities/<str:pk>/",
        views.EntityViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="knowledge-entity-detail",
    ),
    path(
        f"{GRAPH}relations/",
        views.RelationViewSet.as_view({"get": "list", "post": "create"}),
        name="knowledge-relation-list",
    ),
    path(
        f"{GRAPH}relations/<str:pk>/",
        views.RelationViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="knowledge-relation-detail",
    ),
    path(f"{GRAPH}upsert", views.GraphViewSet.as_view({"post": "upsert"}), name="knowledge-upsert"),
    path(f"{GRAPH}search", views.GraphViewSet.as_view({"post": "search"}), name="knowledge-search"),
]
