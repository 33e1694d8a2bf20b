"""Dashboard routes of agents' knowledge graphs."""

from django.urls import URLPattern, path

from apps.dashboard.views import knowledge

GRAPH = "agents/<str:key>/knowledge/"
ENTITY = f"{GRAPH}entities/<str:pk>/"

urlpatterns: list[URLPattern] = [
    path(GRAPH, knowledge.entity_list, name="knowledge"),
    path(f"{GRAPH}entities/new/", knowledge.entity_create, name="knowledge_entity_create"),
    path(ENTITY, knowledge.entity_detail, name="knowledge_entity"),
    path(f"{ENTITY}edit/", knowledge.entity_edit, name="knowledge_entity_edit"),
    path(f"{ENTITY}delete/", knowledge.entity_delete, name="knowledge_entity_delete"),
    path(f"{ENTITY}relations/", knowledge.relation_add, name="knowledge_relation_add"),
    path(f"{GRAPH}relations/<str:pk>/delete/", knowledge.relation_delete, name="knowledge_relation_delete"),
]
