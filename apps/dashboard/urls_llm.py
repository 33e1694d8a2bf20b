"""Dashboard routes of llm providers."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
