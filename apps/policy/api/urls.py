"""Routes of the policy API (documents, versions, explain, import/export)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
