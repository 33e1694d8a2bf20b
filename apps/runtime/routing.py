from django.urls import path

from apps.runtime.consumers import EventsConsumer

websocket_urlpatterns = [path("ws/events/", EventsConsumer.as_asgi())]
