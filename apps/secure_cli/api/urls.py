"""Routes of the credentialed CLIs API."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
