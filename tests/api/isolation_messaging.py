"""Tenant-isolation cases for the messaging routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from apps.messaging.models import Channel, OutboundMessage
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case

SECRET_TOKEN = "123456789:AAEa-secret-bot-token-of-tenant-a"


def make_channel(tenant: Tenant, name: str = "a-secret-channel") -> dict[str, str]:
    """A Telegram channel of ``tenant`` with one logged message (saved directly: its URL is never
    contacted by these tests)."""
    channel = Channel.objects.create(
        tenant=tenant,
        name=name,
        kind=Channel.Kind.TELEGRAM,
        url="https://a-secret-telegram.invalid",
        secret=SECRET_TOKEN,
        default_chat_id="-100777",
        topics={"-100777:topic:1": ["datetime"]},
    )
    OutboundMessage.objects.create(
        tenant=tenant,
        channel=channel,
        channel_name=channel.name,
        chat_id="-100777",
        text="a-secret-message-text",
        status=OutboundMessage.Status.SENT,
    )
    return {"pk": str(channel.pk)}


def _list(tenant: Tenant) -> dict[str, str]:
    make_channel(tenant)
    return {"name": "a-secret-channel", "host": "a-secret-telegram.invalid", "token": SECRET_TOKEN}


CASES: dict[str, Case] = {
    "messaging-channel-list": Case(make=_list, collection=True),
    "messaging-channel-detail": Case(
        make=make_channel,
        writes=[("patch", {"name": "hijacked", "secret": "1:b"}), ("delete", None), ("post", {})],
    ),
    "messaging-channel-test": Case(make=make_channel, writes=[("post", {"chat_id": "-100777"})]),
    "messaging-channel-messages": Case(make=make_channel),
}
