"""Routes of the sandbox API (/api/v1/sandbox/...)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
