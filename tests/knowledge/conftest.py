"""Fixtures of the knowledge tests: tenant A's agent ``bot``, a small graph of it, and the events
delivered on tenant A's ``knowledge`` topic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.knowledge.models import Entity
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from tests.knowledge.support import ref, relation, upsert


@pytest.fixture
def agent(tenant_a: Tenant) -> Agent:
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


@pytest.fixture
def company(tenant_a: Tenant, agent: Agent) -> dict[tuple[str, str], Entity]:
    """Ada (works at Acme, leads Apollo), Grace (works at Acme), Apollo (depends on Postgres)."""
    return upsert(
        tenant_a,
        agent,
        [
            {
                "type": "person",
                "name": "Ada Lovelace",
                "aliases": ["Ada"],
                "description": "Leads the engine work.",
            },
            {"type": "person", "name": "Grace Hopper", "description": "Writes compilers."},
            {"type": "organization", "name": "Acme Corp", "properties": {"founded": 1949}},
            {"type": "project", "name": "Apollo", "description": "The new billing engine."},
            {"type": "technology", "name": "PostgreSQL", "aliases": ["Postgres"]},
        ],
        [
            relation(ref("person", "Ada Lovelace"), "works_at", ref("organization", "Acme Corp"), weight=0.9),
            relation(ref("person", "Grace Hopper"), "works_at", ref("organization", "Acme Corp")),
            relation(ref("person", "Ada Lovelace"), "leads", ref("project", "Apollo")),
            relation(ref("project", "Apollo"), "depends_on", ref("technology", "PostgreSQL")),
        ],
    )


@pytest.fixture
def published(tenant_a: Tenant) -> Callable[[], list[dict[str, Any]]]:
    """What was delivered on tenant A's ``knowledge`` topic, in order."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "knowledge"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read
