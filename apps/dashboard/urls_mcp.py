"""Dashboard routes of MCP servers, grants and access requests."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
