"""The team_message tool through the runtime pipeline: send (with its message task), broadcast (lead only),
and read with per-recipient read state; each write audited and published on the team's topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.realtime import events
from apps.runtime import pipeline
from apps.teams import board
from apps.teams.models import Task, TaskEvent, TeamMessage, TeamMessageRead
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.toolkit import gateway
from apps.toolkit.results import ToolResult
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


def call(agent: Agent, action: str, *, ctx: dict[str, Any] | None = None, **args: Any) -> ToolResult:
    outcome = pipeline.execute(
        actor=Actor.system(agent.tenant),
        request=gateway.CallRequest(
            agent=agent, tool="team_message", args={"action": action, **args}, **(ctx or {})
        ),
    )
    return outcome.result


def inbox(agent: Agent) -> dict[str, Any]:
    result = call(agent, "read")
    assert result.is_error is False, result.for_llm
    return json.loads(result.for_llm)  # type: ignore[no-any-return]


@pytest.fixture
def team_events(crew):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(crew.team.tenant_id, board.topic(crew.team)), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [layer.deserialize(bytes(row))["event"] for row in rows]

    return read


def test_send_creates_the_message_and_its_task(crew, team_events):
    result = call(crew.alice, "send", to=crew.bob.key, text="Can you review my PR?", ctx={"chat_id": "c1"})
    assert (result.is_error, result.for_llm) == (False, f"Message sent to {crew.bob.key}.")
    message = TeamMessage.objects.for_tenant(crew.team.tenant).get()
    assert (message.from_agent, message.to_agent, message.message_type, message.content) == (
        crew.alice,
        crew.bob,
        "chat",
        "Can you review my PR?",
    )
    assert message.task_id is not None
    task = Task.objects.for_tenant(crew.team.tenant).get(pk=message.task_id)
    assert (task.task_type, task.status, task.owner, task.subject, task.chat_id) == (
        "message",
        Task.Status.IN_PROGRESS,
        crew.bob,
        "Can you review my PR?",
        "c1",
    )
    assert task.lock_expires_at is not None
    assert task.locked_at is not None
    assert 29 * 60 < (task.lock_expires_at - task.locked_at).total_seconds() <= 30 * 60 + 5
    assert list(
        TaskEvent.objects.for_tenant(task.tenant)
        .filter(task_id=task.pk)
        .values_list("event_type", "actor_id")
    ) == [("created", crew.alice.key), ("assigned", crew.alice.key)]
    audit = AuditEvent.objects.for_tenant(crew.team.tenant).get(verb="team.message.sent")
    assert audit.data["to"] == crew.bob.key
    sent = [e for e in team_events() if e["type"] == "message.sent"]
    assert len(sent) == 1
    assert sent[0]["data"]["delivery"] == {
        "agent": crew.bob.key,
        "channel": "system",
        "sender": f"teammate:{crew.alice.key}",
        "content": f"[Team message from {crew.alice.key}]: Can you review my PR?",
        "media": [],
        "origin": {"channel": "", "chat_id": "c1", "user_id": ""},
    }


def test_send_subject_is_truncated(crew):
    call(crew.alice, "send", to=crew.bob.key, text="x" * 150)
    task = Task.objects.for_tenant(crew.team.tenant).get()
    assert task.subject == "x" * 100 + "..."
    assert task.description == "x" * 150


def test_send_refusals(crew, tenant_a):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="stranger", name="Stranger")
    cases = [
        ({"text": "hi"}, "to is required"),
        ({"to": crew.bob.key}, "text is required"),
        ({"to": crew.bob.key, "text": "  "}, "text is required"),
        ({"to": "stranger", "text": "hi"}, "'stranger' is not a member of team Builders"),
        ({"to": crew.alice.key, "text": "hi"}, "cannot send a message to yourself"),
        ({"to": crew.bob.key, "text": "é" * 5001}, "longer than 10000 bytes"),
    ]
    for args, message in cases:
        result = call(crew.alice, "send", **args)
        assert result.is_error is True, args
        assert message in result.for_llm, result.for_llm
    assert not TeamMessage.objects.for_tenant(crew.team.tenant).exists()
    assert not Task.objects.for_tenant(crew.team.tenant).exists()


def test_broadcast_is_lead_only(crew, team_events):
    refused = call(crew.alice, "broadcast", text="hello all")
    assert (refused.is_error, refused.for_llm) == (True, "only the team lead can perform this action")
    assert not TeamMessage.objects.for_tenant(crew.team.tenant).exists()
    result = call(crew.lead, "broadcast", text="Stand-up in 5")
    assert (result.is_error, result.for_llm) == (False, "Broadcast sent to all teammates.")
    message = TeamMessage.objects.for_tenant(crew.team.tenant).get()
    assert (message.to_agent, message.message_type) == (None, "broadcast")
    published = [e for e in team_events() if e["type"] == "message.broadcast"]
    assert sorted(published[0]["data"]["recipients"]) == sorted([crew.alice.key, crew.bob.key])
    assert AuditEvent.objects.for_tenant(crew.team.tenant).filter(verb="team.message.broadcast").count() == 1
    via_system = call(crew.alice, "broadcast", text="from the system channel", ctx={"channel": "system"})
    assert via_system.is_error is False


def test_broadcast_reads_are_per_recipient(crew, team_events):
    call(crew.lead, "broadcast", text="Stand-up in 5")
    alice_first = inbox(crew.alice)
    assert [m["content"] for m in alice_first["messages"]] == ["Stand-up in 5"]
    assert alice_first["messages"][0]["from"] == crew.lead.key
    assert inbox(crew.alice)["count"] == 0  # read for alice ...
    bob = inbox(crew.bob)  # ... still unread for bob
    assert [m["content"] for m in bob["messages"]] == ["Stand-up in 5"]
    assert inbox(crew.lead)["count"] == 0  # the sender never gets their own broadcast
    message = TeamMessage.objects.for_tenant(crew.team.tenant).get()
    readers = TeamMessageRead.objects.for_tenant(crew.team.tenant).filter(message=message)
    assert sorted(r.agent.key for r in readers) == sorted([crew.alice.key, crew.bob.key])
    reads = [e for e in team_events() if e["type"] == "message.read"]
    assert [e["data"]["agent"] for e in reads] == [crew.alice.key, crew.bob.key]


def test_read_only_shows_ones_own_direct_messages(crew):
    call(crew.alice, "send", to=crew.bob.key, text="for bob")
    call(crew.bob, "send", to=crew.lead.key, text="for the lead")
    assert [m["content"] for m in inbox(crew.bob)["messages"]] == ["for bob"]
    assert [m["content"] for m in inbox(crew.lead)["messages"]] == ["for the lead"]
    assert inbox(crew.alice)["count"] == 0


def test_read_pages_of_fifty(crew):
    for i in range(53):
        TeamMessage.objects.create(
            tenant=crew.team.tenant,
            team=crew.team,
            from_agent=crew.lead,
            to_agent=crew.alice,
            content=f"m{i}",
        )
    first = inbox(crew.alice)
    assert first["count"] == 50
    assert first["has_more"] is True
    assert "read again" in first["note"]
    assert first["messages"][0]["content"] == "m0"
    second = inbox(crew.alice)
    assert [m["content"] for m in second["messages"]] == ["m50", "m51", "m52"]
    assert "has_more" not in second


def test_messages_stay_in_their_team_and_tenant(crew, tenant_a, tenant_b):
    other = make_crew(tenant_a, "Others")
    refused = call(crew.alice, "send", to=other.bob.key, text="hi")
    assert refused.is_error is True
    assert "is not a member of team Builders" in refused.for_llm
    foreign = make_crew(tenant_b, "Builders")
    call(foreign.lead, "broadcast", text="tenant B only")
    call(other.lead, "broadcast", text="other team only")
    assert inbox(crew.alice)["count"] == 0
    assert inbox(foreign.alice)["messages"][0]["content"] == "tenant B only"


def test_unknown_action_and_no_team(crew, tenant_a):
    result = call(crew.alice, "shout", text="x")
    assert result.is_error is True
    loner = tenant_services.agent_create(actor=Actor.system(tenant_a), key="loner", name="Loner")
    result = call(loner, "read")
    assert (result.is_error, result.for_llm) == (True, "this agent is not part of any team")
