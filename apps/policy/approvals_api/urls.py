"""Routes of the exec-approvals API (pending approvals, decisions, allow-always rules)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
