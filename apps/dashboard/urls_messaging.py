"""Dashboard routes of messaging channels."""

from django.urls import URLPattern, path

from apps.dashboard.views import messaging

urlpatterns: list[URLPattern] = [
    path("channels/", messaging.channel_list, name="channels"),
    path("channels/new/", messaging.channel_create, name="channel_create"),
    path("channels/<uuid:id>/edit/", messaging.channel_edit, name="channel_edit"),
    path("channels/<uuid:id>/test/", messaging.channel_test, name="channel_test"),
    path("channels/<uuid:id>/messages/", messaging.channel_messages, name="channel_messages"),
    path("channels/<uuid:id>/delete/", messaging.channel_delete, name="channel_delete"),
]
