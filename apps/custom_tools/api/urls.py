"""Routes of the custom tools API."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
