"""Dashboard routes of skills."""

from django.urls import URLPattern, path

from apps.dashboard.views import skills

urlpatterns: list[URLPattern] = [
    path("skills/", skills.skill_list, name="skills"),
    path("skills/new/", skills.skill_create, name="skill_create"),
    path("skills/<uuid:id>/", skills.skill_detail, name="skill"),
    path("skills/<uuid:id>/edit/", skills.skill_edit, name="skill_edit"),
    path("skills/<uuid:id>/enabled/", skills.skill_enable, name="skill_enable"),
    path("skills/<uuid:id>/delete/", skills.skill_delete, name="skill_delete"),
]
