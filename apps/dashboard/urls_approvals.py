"""Dashboard routes of the approvals inbox and the allow-always rules."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
