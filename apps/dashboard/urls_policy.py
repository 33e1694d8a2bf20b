"""Dashboard routes of the policy editor (tenant, agent, channel group), its live explain and versions."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
