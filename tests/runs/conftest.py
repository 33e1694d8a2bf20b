"""Fixtures of the run tests: the scripted OpenAI-compatible server of tests/llm on 127.0.0.2 and a
provider of tenant A pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apps.accounts import services as tenant_services
from apps.llm import services as llm_services
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.llm.fake_provider import KEY, PUBLIC_IP, FakeProvider
from tests.local_http import serving


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeProvider]:
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as server:
        yield FakeProvider(server).install()


@pytest.fixture
def provider(fake: FakeProvider, tenant_a: Tenant) -> Any:
    return llm_services.provider_create(
        actor=Actor.system(tenant_a),
        name="main",
        base_url=fake.base_url,
        api_key=KEY,
        models={"chat": "fake-chat"},
    )


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    """Tenant A's agent ``bot``; the tenant's turns (subagents, scheduled jobs) use the built-in runner."""
    system = Actor.system(tenant_a)
    tenant_services.tenant_update(actor=system, changes={"settings": {"runner": "builtin"}})
    return tenant_services.agent_create(actor=system, key="bot", name="Bot")
