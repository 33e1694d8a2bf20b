"""Live events leave only with the transaction that caused them: stored on commit, gone on rollback."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django.db import transaction

from apps.accounts import services
from apps.realtime import events
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def subscribe():
    """A channel of this process subscribed to a tenant's topic; returns a reader of its messages."""
    layer = get_channel_layer()

    def make(tenant, topic):
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(events.group_name(tenant.pk, topic), channel)

        def read() -> list[dict]:
            rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
            return [layer.deserialize(bytes(row)) for row in rows]

        return read

    return make


def test_a_change_publishes_its_events_with_the_documented_shape(tenant_a, subscribe):
    audit, agents = subscribe(tenant_a, "audit"), subscribe(tenant_a, "agents")
    services.agent_create(actor=Actor.system(tenant_a), key="evt", name="Evt")
    [audit_message] = audit()
    [agent_message] = agents()
    assert audit_message["event"]["type"] == "audit.event"
    event = events.public(agent_message["event"])
    assert agent_message["type"] == "toolgate.event"
    assert set(event) == {"id", "type", "tenant", "topic", "data", "ts"}
    assert (event["tenant"], event["topic"], event["type"]) == (tenant_a.slug, "agents", "agent.created")
    assert event["data"]["key"] == "evt"


def test_rolled_back_changes_publish_nothing(tenant_a, subscribe):
    agents = subscribe(tenant_a, "agents")
    with pytest.raises(RuntimeError), transaction.atomic():
        services.agent_create(actor=Actor.system(tenant_a), key="gone", name="Gone")
        raise RuntimeError("abort")
    assert agents() == []


def test_other_tenants_and_topics_get_nothing(tenant_a, tenant_b, subscribe):
    b_agents, a_members = subscribe(tenant_b, "agents"), subscribe(tenant_a, "members")
    services.agent_create(actor=Actor.system(tenant_a), key="only-a", name="A")
    assert b_agents() == []
    assert a_members() == []


def test_unknown_topics_are_a_programming_error(tenant_a):
    with pytest.raises(ValueError, match="unknown event topic"):
        events.publish(tenant=tenant_a, topic="nope", type="x", data={})


def test_group_names_carry_the_tenant(tenant_a, tenant_b):
    assert events.group_name(tenant_a.pk, "audit") != events.group_name(tenant_b.pk, "audit")
    assert tenant_a.pk.hex in events.group_name(tenant_a.pk, "audit")
