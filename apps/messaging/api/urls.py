"""Routes of the channels API."""

from django.urls import URLPattern, path

from apps.messaging.api import views

CHANNEL = "channels/<uuid:pk>"

urlpatterns: list[URLPattern] = [
    path(
        "channels/",
        views.ChannelViewSet.as_view({"get": "list", "post": "create"}),
        name="messaging-channel-list",
    ),
    path(
        f"{CHANNEL}/",
        views.ChannelViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="messaging-channel-detail",
    ),
    path(f"{CHANNEL}/test", views.ChannelViewSet.as_view({"post": "test"}), name="messaging-channel-test"),
    path(
        f"{CHANNEL}/messages/",
        views.OutboundMessageViewSet.as_view({"get": "list"}),
        name="messaging-channel-messages",
    ),
]
