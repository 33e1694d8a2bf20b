"""Dashboard routes of the exec sandbox."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
