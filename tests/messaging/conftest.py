"""Fixtures of the messaging tests: the webhook receiver and the fake Bot API on 127.0.0.2, tenant A's
agent ``bot`` and helpers that configure channels through the service."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.messaging import services
from apps.messaging.models import Channel
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.local_http import serving
from tests.messaging.fakes import HEADER_SECRET, PUBLIC_IP, TOKEN, WEBHOOK_SECRET, FakeTelegram, FakeWebhook


@pytest.fixture
def allow_local(settings: Any) -> None:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"


@pytest.fixture
def hook(allow_local: None) -> Iterator[FakeWebhook]:
    with serving(PUBLIC_IP) as server:
        yield FakeWebhook(server).install()


@pytest.fixture
def telegram(allow_local: None) -> Iterator[FakeTelegram]:
    with serving(PUBLIC_IP) as server:
        yield FakeTelegram(server).install()


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


MakeChannel = Callable[..., Channel]


@pytest.fixture
def webhook_channel(hook: FakeWebhook, tenant_a: Tenant) -> MakeChannel:
    def make(name: str = "hooks", tenant: Tenant | None = None, **fields: Any) -> Channel:
        values: dict[str, Any] = {
            "kind": "webhook",
            "url": hook.url,
            "secret": WEBHOOK_SECRET,
            "extra_headers": {"Authorization": HEADER_SECRET},
            "default_chat_id": "general",
            **fields,
        }
        return services.channel_create(actor=Actor.system(tenant or tenant_a), name=name, **values)

    return make


@pytest.fixture
def telegram_channel(telegram: FakeTelegram, tenant_a: Tenant) -> MakeChannel:
    def make(name: str = "tg", tenant: Tenant | None = None, **fields: Any) -> Channel:
        values: dict[str, Any] = {
            "kind": "telegram",
            "url": telegram.base_url,
            "secret": TOKEN,
            "default_chat_id": "-100123",
            **fields,
        }
        return services.channel_create(actor=Actor.system(tenant or tenant_a), name=name, **values)

    return make
