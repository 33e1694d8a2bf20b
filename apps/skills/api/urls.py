"""Routes of the skills API."""

from django.urls import URLPattern, path

from apps.skills.api import views

SKILL = "skills/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path("skills/", views.SkillViewSet.as_view({"get": "list", "post": "create"}), name="skill-list"),
    path("skills/uses/", views.SkillUseViewSet.as_view({"get": "list"}), name="skill-use-list"),
    path(
        f"{SKILL}/",
        views.SkillViewSet.as_view(
            {"get": "retrieve", "put": "update", "patch": "partial_update", "delete": "destroy"}
        ),
        name="skill-detail",
    ),
    path(f"{SKILL}/files/", views.SkillViewSet.as_view({"get": "files"}), name="skill-files"),
    path("agents/<str:key>/skills/context", views.SkillContextView.as_view(), name="agent-skill-context"),
]
