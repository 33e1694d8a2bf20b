"""Routes of the teams API (teams, members, tasks and their actions, escalations, team events)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
