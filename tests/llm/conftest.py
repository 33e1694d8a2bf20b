"""Fixtures of the provider tests: the scripted OpenAI-compatible server on 127.0.0.2, tenant A's agent
``bot`` and a helper that configures a provider through the service."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.llm import services
from apps.llm.models import Provider
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.llm.fake_provider import HEADER_SECRET, KEY, PUBLIC_IP, FakeProvider
from tests.local_http import serving

ALL_MODELS = {
    "chat": "fake-chat",
    "vision": "fake-vision",
    "image": "fake-image",
    "speech": "fake-tts",
    "transcription": "fake-whisper",
    "audio": "fake-audio",
    "video": "fake-video",
}


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeProvider]:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        yield FakeProvider(server).install()


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


MakeProvider = Callable[..., Provider]


@pytest.fixture
def make_provider(fake: FakeProvider) -> MakeProvider:
    def make(
        tenant: Tenant, name: str = "main", models: dict[str, str] | None = None, **fields: Any
    ) -> Provider:
        values: dict[str, Any] = {
            "base_url": fake.base_url,
            "api_key": KEY,
            "extra_headers": {"OpenAI-Organization": HEADER_SECRET},
            "models": ALL_MODELS if models is None else models,
            **fields,
        }
        return services.provider_create(actor=Actor.system(tenant), name=name, **values)

    return make
