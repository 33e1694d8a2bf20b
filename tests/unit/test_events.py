"""Live events leave only after the transaction that caused them commits."""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.realtime import events
from apps.tenants import services
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    delivered: list[dict] = []
    monkeypatch.setattr(events, "send_now", delivered.append)
    return delivered


def test_events_wait_for_commit(tenant_a, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.agent_create(actor=Actor.system(tenant_a), key="evt", name="Evt")
    types = [(e["topic"], e["type"]) for e in sent]
    assert types == [("audit", "audit.event"), ("agents", "agent.created")]
    event = events.public(sent[1])
    assert set(event) == {"id", "type", "tenant", "topic", "data", "ts"}
    assert event["tenant"] == tenant_a.slug
    assert event["data"]["key"] == "evt"


def test_rolled_back_changes_send_nothing(tenant_a, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        services.agent_create(actor=Actor.system(tenant_a), key="gone", name="Gone")
        raise RuntimeError("abort")
    assert sent == []


def test_unknown_topics_are_a_programming_error(tenant_a):
    with pytest.raises(ValueError, match="unknown event topic"):
        events.publish(tenant=tenant_a, topic="nope", type="x", data={})


def test_group_names_carry_the_tenant(tenant_a, tenant_b):
    assert events.group_name(tenant_a.pk, "audit") != events.group_name(tenant_b.pk, "audit")
    assert tenant_a.pk.hex in events.group_name(tenant_a.pk, "audit")
