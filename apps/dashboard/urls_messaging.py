"""Dashboard routes of messaging channels."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
