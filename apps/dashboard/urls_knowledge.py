"""Dashboard routes of knowledge."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
