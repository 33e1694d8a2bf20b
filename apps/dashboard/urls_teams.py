"""Dashboard routes of teams: the list and settings, the live board, task detail, escalations, audit log."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
