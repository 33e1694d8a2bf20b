"""Dashboard routes of skills."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
