"""The PostgreSQL channel layer as sync code (a django-q2 worker, this test process) uses it.

``async_to_sync`` runs every call from sync code in a new, short-lived event loop. These tests publish
the way a worker does and read what the layer stored for a subscriber channel straight from its table:
no live processes needed.
"""

from __future__ import annotations

import os
import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import GroupChannel, Message
from django.db import connection

from apps.realtime import events
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

PUBLISH_BOUND = 5.0  # seconds; a broken pool waits 30 s for a connection before it gives up


@pytest.fixture
def layer():
    layer = get_channel_layer()
    assert layer is not None
    return layer


def stored_for(layer, channel: str) -> list[dict]:
    rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
    return [layer.deserialize(bytes(row)) for row in rows]


def drop_layer_connections() -> int:
    """What a database restart or an idle timeout does to this process's channel-layer connections."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            [f"toolgate-channels-{os.getpid()}"],
        )
        return int(cursor.fetchone()[0])


def layer_connections_gone(within: float = 3.0) -> bool:
    """Whether this process has no channel-layer connection left. A connection closed by the client is
    still listed until its server process has exited (a few ms, longer on a loaded machine), so the
    check waits a little for that before it calls a connection left open."""
    deadline = time.monotonic() + within
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [f"toolgate-channels-{os.getpid()}"],
            )
            if int(cursor.fetchone()[0]) == 0:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def test_sync_publishers_survive_the_server_dropping_connections(layer):
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("tg.layer-test.audit", channel)

    for n in range(4):
        started = time.monotonic()
        async_to_sync(layer.group_send)("tg.layer-test.audit", {"type": "test.message", "n": n})
        assert time.monotonic() - started < PUBLISH_BOUND
        # Each call's loop has ended: its connections were closed with it, none is left to go stale.
        assert layer_connections_gone()
        drop_layer_connections()  # and a server restart now would find nothing of ours to cut

    assert [m["n"] for m in stored_for(layer, channel)] == [0, 1, 2, 3]


def test_publish_reaches_the_group_of_the_events_tenant_and_topic(layer, tenant_a, tenant_b):
    audit_a = async_to_sync(layer.new_channel)()
    agents_a = async_to_sync(layer.new_channel)()
    audit_b = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "audit"), audit_a)
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "agents"), agents_a)
    async_to_sync(layer.group_add)(events.group_name(tenant_b.pk, "audit"), audit_b)

    events.publish(tenant=tenant_a, topic="audit", type="test.happened", data={"x": 1})

    [message] = stored_for(layer, audit_a)
    assert message["type"] == "toolgate.event"
    assert events.public(message["event"]) == {
        "id": message["event"]["id"],
        "type": "test.happened",
        "tenant": tenant_a.slug,
        "topic": "audit",
        "data": {"x": 1},
        "ts": message["event"]["ts"],
    }
    assert stored_for(layer, agents_a) == []
    assert stored_for(layer, audit_b) == []


def test_publish_without_subscribers_stores_nothing(layer, tenant_a):
    before = Message.objects.count()
    factories.make_api_key(tenant_a, "admin")  # publishes on audit and api_keys; nobody listens
    assert Message.objects.count() == before


def test_group_discard_removes_the_membership(layer):
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("tg.layer-test.agents", channel)
    async_to_sync(layer.group_discard)("tg.layer-test.agents", channel)

    assert not GroupChannel.objects.filter(channel=channel).exists()
    async_to_sync(layer.group_send)("tg.layer-test.agents", {"type": "test.message"})
    assert stored_for(layer, channel) == []


def test_a_closed_socket_leaves_no_channel_state_in_the_layer(tenant_a):
    """A long-running daphne serves many sockets: each closed one must give back its queue and claim."""
    from channels.testing import WebsocketCommunicator

    from apps.tenants.roles import Role
    from config.asgi import application

    raw = factories.make_api_key(tenant_a, Role.ADMIN)

    async def one_socket() -> tuple[str, bool, bool]:
        layer = get_channel_layer()
        claimed_before = set(layer._channel_advisory_locks)
        communicator = WebsocketCommunicator(
            application, "/ws/events/", headers=[(b"authorization", f"Bearer {raw}".encode())]
        )
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["type"] == "hello"
        await communicator.send_json_to({"type": "subscribe", "topics": ["audit"]})
        assert (await communicator.receive_json_from(timeout=10))["type"] == "subscribed"
        [channel] = set(layer._channel_advisory_locks) - claimed_before
        held = channel in layer._queues
        await communicator.disconnect()
        return channel, held, channel in layer._queues or channel in layer._channel_advisory_locks

    channel, held_while_open, kept_after_close = async_to_sync(one_socket)()
    assert held_while_open
    assert not kept_after_close
    assert not GroupChannel.objects.filter(channel=channel).exists()
