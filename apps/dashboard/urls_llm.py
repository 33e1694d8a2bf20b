"""Dashboard routes of llm providers."""

from django.urls import URLPattern, path

from apps.dashboard.views import llm

urlpatterns: list[URLPattern] = [
    path("providers/", llm.provider_list, name="providers"),
    path("providers/new/", llm.provider_create, name="provider_create"),
    path("providers/<uuid:id>/edit/", llm.provider_edit, name="provider_edit"),
    path("providers/<uuid:id>/test/", llm.provider_test, name="provider_test"),
    path("providers/<uuid:id>/delete/", llm.provider_delete, name="provider_delete"),
]
