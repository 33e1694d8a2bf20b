"""Routes of the MCP API: servers, grants, access requests."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
