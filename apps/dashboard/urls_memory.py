"""Dashboard routes of agents' memory documents."""

from django.urls import URLPattern, path

from apps.dashboard.views import memory

MEMORY = "agents/<str:key>/memory/"

urlpatterns: list[URLPattern] = [
    path(MEMORY, memory.document_list, name="memory"),
    path(f"{MEMORY}document/", memory.document_detail, name="memory_document"),
    path(f"{MEMORY}document/save/", memory.document_save, name="memory_document_save"),
    path(f"{MEMORY}document/delete/", memory.document_delete, name="memory_document_delete"),
]
