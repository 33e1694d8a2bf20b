"""The channels API: where the message and create_forum_topic tools send.

Administrators read and write channels (their configuration holds a bot token or a signing secret);
another tenant's channel is 404 whatever the method. Every write goes through
``apps.messaging.services`` (audited without secrets, published on the ``messaging`` topic).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.messaging import selectors, services
from apps.messaging.access import access_channel
from apps.messaging.api import serializers as s
from apps.messaging.models import Channel
from apps.tenants.api.base import StrictSerializer, TenantScopedViewSet
from apps.tenants.api.pagination import CreatedCursorPagination
from apps.tenants.roles import Role


def _body(serializer: type[StrictSerializer], request: Request) -> dict[str, Any]:
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class ChannelViewSet(TenantScopedViewSet):
    """Channels of the tenant: a ``name`` (lower-case letters, digits, ``-`` and ``_``; unique in the
    tenant), a ``kind`` (``webhook`` or ``telegram``), a ``url`` (https; checked against the SSRF
    guard), a write-only ``secret`` (the webhook's signing secret or the bot token) and
    ``extra_headers``, a ``default_chat_id``, ``topics`` (chat or topic id → tool allow list) and
    ``agent_keys`` (the agents that may use it; empty for all). Invalid fields are 400 by field, a name
    in use is 409.

    ``POST …/test`` sends a test message (to ``chat_id`` or the default chat) and answers ``ok``,
    ``latency_ms`` or the error; ``GET …/messages/`` is what was sent, newest first."""

    model = Channel
    serializer_class = s.ChannelOutput
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    channel: Channel

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "pk" in kwargs:
            self.channel = access_channel(actor=self.actor, id=kwargs["pk"])

    def scope_queryset(self, queryset: Any) -> Any:
        if self.action != "list":
            return queryset.none()
        return selectors.channel_list(tenant=self.actor.tenant)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.ChannelOutput(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(s.ChannelOutput(self.channel).data)

    @extend_schema(request=s.ChannelCreateInput, responses={201: s.ChannelOutput})
    def create(self, request: Request) -> Response:
        channel = services.channel_create(actor=self.actor, **_body(s.ChannelCreateInput, request))
        channel = access_channel(actor=self.actor, id=channel.pk)
        return Response(s.ChannelOutput(channel).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ChannelUpdateInput, responses={200: s.ChannelOutput})
    def partial_update(self, request: Request, pk: str) -> Response:
        services.channel_update(
            actor=self.actor, channel=self.channel, **_body(s.ChannelUpdateInput, request)
        )
        return Response(s.ChannelOutput(access_channel(actor=self.actor, id=pk)).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        services.channel_delete(actor=self.actor, channel=self.channel)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.ChannelTestInput, responses={200: s.ChannelTestOutput})
    def test(self, request: Request, pk: str) -> Response:
        body = _body(s.ChannelTestInput, request) if request.data else {}
        return Response(
            services.channel_test(actor=self.actor, channel=self.channel, chat_id=body.get("chat_id", ""))
        )


class OutboundMessageViewSet(TenantScopedViewSet):
    """What was sent through a channel (messages, forum topics, tests), newest first, with the status,
    the error and the latency."""

    model = Channel
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    pagination_class = CreatedCursorPagination
    serializer_class = s.OutboundMessageOutput

    def scope_queryset(self, queryset: Any) -> Any:
        return queryset.none()

    @extend_schema(responses={200: s.OutboundMessageOutput(many=True)})
    def list(self, request: Request, pk: str) -> Response:
        channel = access_channel(actor=self.actor, id=pk)
        page = self.paginate_queryset(selectors.message_list(tenant=self.actor.tenant, channel=channel))
        return self.get_paginated_response(s.OutboundMessageOutput(page, many=True).data)
