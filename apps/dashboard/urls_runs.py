"""Dashboard routes of runs, sessions and scheduled jobs."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
