"""Dashboard routes of the exec sandbox."""

from django.urls import URLPattern, path

from apps.dashboard.views import sandbox

urlpatterns: list[URLPattern] = [
    path("sandbox/", sandbox.sandbox_overview, name="sandbox"),
    path("sandbox/containers/", sandbox.sandbox_containers, name="sandbox_containers"),
    path("sandbox/containers/<uuid:id>/stop/", sandbox.sandbox_container_stop, name="sandbox_container_stop"),
    path("sandbox/agents/", sandbox.sandbox_agent_pick, name="sandbox_agent_pick"),
    path("sandbox/agents/<str:key>/", sandbox.sandbox_agent, name="sandbox_agent"),
]
