from django.urls import path

from apps.runtime.api import views

urlpatterns = [
    path("runtime/execute", views.ExecuteView.as_view(), name="runtime-execute"),
    path("agents/<str:key>/tools", views.AgentToolsView.as_view(), name="agent-tools"),
    path("tools/catalog/", views.CatalogView.as_view(), name="tool-catalog"),
]
