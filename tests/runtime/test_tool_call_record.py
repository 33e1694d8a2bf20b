"""The record of a tool call and its live ``tool_call`` event: written in one round trip, the row never
depending on its event.

Transactional tests: a call through the API runs in autocommit, as under daphne (a test transaction
around it would change how the event is stored).
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.accounts import services
from apps.audit.models import ToolCall
from apps.audit.services import serialize_tool_call
from apps.realtime import events
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def subscriber(tenant_a):
    """A channel subscribed to tenant A's ``tool_calls`` topic, as a websocket's is."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "tool_calls"), channel)
    yield layer, channel
    async_to_sync(layer.group_discard)(events.group_name(tenant_a.pk, "tool_calls"), channel)


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def execute(client) -> dict:
    body = {"agent": "bot", "tool": "datetime", "args": {"timezone": "UTC"}}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def stored_for(layer, channel: str) -> list[dict]:
    rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
    return [layer.deserialize(bytes(row)) for row in rows]


def writes(queries: CaptureQueriesContext, table: str) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if f'INSERT INTO "{table}"' in q["sql"]]


def test_the_row_and_its_live_event_are_written_by_one_statement(member_a, tenant_a, agent, subscriber):
    layer, channel = subscriber
    with CaptureQueriesContext(connection) as queries:
        body = execute(member_a)

    [statement] = writes(queries, "audit_toolcall")
    assert writes(queries, "channels_postgres_message") == [statement]
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    [message] = stored_for(layer, channel)
    assert message["type"] == "toolgate.event"
    event = events.public(message["event"])
    assert event == {
        "id": event["id"],
        "type": "tool_call",
        "tenant": tenant_a.slug,
        "topic": "tool_calls",
        "data": serialize_tool_call(row),
        "ts": event["ts"],
    }
    assert event["data"]["resolved_tool"] == "datetime"
    assert event["data"]["status"] == "ok"


def failing_statement(self, group, message):
    return "INSERT INTO no_such_table VALUES (%s)", [1]


def unserializable(self, group, message):
    raise TypeError("can not serialize 'object' object")


@pytest.mark.parametrize("broken", [failing_statement, unserializable])
def test_the_row_lands_when_its_live_event_cannot_be_stored(
    member_a, tenant_a, agent, subscriber, monkeypatch, broken
):
    layer, channel = subscriber

    monkeypatch.setattr(type(layer), "group_send_statement", broken)
    body = execute(member_a)

    assert body["is_error"] is False
    assert ToolCall.objects.for_tenant(tenant_a).filter(pk=body["call_id"], resolved_tool="datetime").exists()
    assert stored_for(layer, channel) == []


def test_the_statement_is_bound_on_the_server(member_a, tenant_a, agent):
    """Its parameters are sent apart from its text (``$1`` …), not quoted into it in Python."""
    with CaptureQueriesContext(connection) as queries:
        execute(member_a)
        execute(member_a)
    recorded = [sql for sql in writes(queries, "audit_toolcall") if sql.startswith("WITH written AS")]
    assert len(recorded) == 2
    assert all("$1" in sql and "'datetime'" not in sql for sql in recorded), recorded
    assert ToolCall.objects.filter(tenant=tenant_a, tool="datetime").count() == 2
