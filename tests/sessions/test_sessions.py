"""Sessions through the public surface: the API (open, list, messages, archive, delete) and the
sessions tools through POST /api/v1/runtime/execute (who sees which session, bounds, errors)."""

from __future__ import annotations

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.sessions import services
from apps.sessions.models import Session, SessionMessage
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(tenant_a):
    return tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def call(client, tool, args=None, *, session_key="", user_id="", agent="bot"):
    body = {
        "agent": agent,
        "tool": tool,
        "args": args or {},
        "context": {"session_key": session_key, "user_id": user_id},
    }
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def open_session(client, key, user_id="alice", **extra):
    return client.post(
        "/api/v1/sessions/", {"agent": "bot", "key": key, "user_id": user_id, **extra}, format="json"
    )


def add(client, session_id, role, content, **extra):
    return client.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": role, "content": content, **extra}, format="json"
    )


# --- API ----------------------------------------------------------------------------------------------


def test_opening_a_session_is_idempotent_by_key_and_audited(member_a, agent, tenant_a):
    first = open_session(member_a, "chat-1", label="Planning")
    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["agent"], body["key"], body["user_id"], body["label"], body["status"]) == (
        "bot",
        "chat-1",
        "alice",
        "Planning",
        "active",
    )
    again = open_session(member_a, "chat-1", user_id="bob")
    assert again.status_code == 200
    assert again.json()["id"] == body["id"]
    assert again.json()["user_id"] == "alice"  # a key names one conversation
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="session.created").count() == 1


def test_messages_are_numbered_in_order_and_paged(member_a, agent):
    session_id = open_session(member_a, "chat-1").json()["id"]
    assert add(member_a, session_id, "user", "hello").json()["seq"] == 1
    calls = [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]
    assert add(member_a, session_id, "assistant", "", tool_calls=calls, output_tokens=7).json()["seq"] == 2
    assert add(member_a, session_id, "tool", "ok", tool_call_id="c1", name="exec").json()["seq"] == 3
    page = member_a.get(f"/api/v1/sessions/{session_id}/messages/?limit=2").json()
    assert [m["seq"] for m in page["messages"]] == [1, 2]
    assert page["next_after"] == 2
    assert page["messages"][1]["tool_calls"] == calls
    rest = member_a.get(f"/api/v1/sessions/{session_id}/messages/?after=2").json()
    assert [(m["seq"], m["role"], m["name"]) for m in rest["messages"]] == [(3, "tool", "exec")]
    assert rest["next_after"] is None
    detail = member_a.get(f"/api/v1/sessions/{session_id}/").json()
    assert (detail["message_count"], detail["output_tokens"]) == (3, 7)
    assert detail["last_message_at"] is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_calls": [{"id": "c"}]}, "tool_calls"),
        ({"role": "user", "content": "x" * 200_001}, "content"),
        ({"role": "user", "content": "nul\x00"}, "content"),
        ({"role": "user", "content": "x", "input_tokens": -1}, "input_tokens"),
        ({"role": "user", "content": "x", "input_tokens": "5"}, "input_tokens"),
        ({"role": "assistant", "tool_calls": "not a list"}, "tool_calls"),
    ],
)
def test_bad_messages_are_400_by_field_with_nothing_stored(member_a, agent, tenant_a, body, field):
    session_id = open_session(member_a, "chat-1").json()["id"]
    response = member_a.post(f"/api/v1/sessions/{session_id}/messages/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["details"]
    assert not SessionMessage.objects.for_tenant(tenant_a).exists()
    assert Session.objects.for_tenant(tenant_a).get().message_count == 0


def test_bad_sessions_are_400_by_field(member_a, agent):
    assert "key" in open_session(member_a, "").json()["error"]["details"]
    assert "key" in open_session(member_a, "k" * 201).json()["error"]["details"]
    unknown = member_a.post("/api/v1/sessions/", {"agent": "nobody", "key": "x"}, format="json")
    assert unknown.status_code == 400
    assert "agent" in unknown.json()["error"]["details"]
    extra = member_a.post("/api/v1/sessions/", {"agent": "bot", "key": "x", "owner": "me"}, format="json")
    assert extra.status_code == 400
    big = open_session(member_a, "x", metadata={"blob": "x" * 20_000})
    assert "metadata" in big.json()["error"]["details"]


def test_archived_sessions_refuse_messages_until_reactivated(admin_a, member_a, agent):
    session_id = open_session(member_a, "chat-1").json()["id"]
    archived = admin_a.patch(f"/api/v1/sessions/{session_id}/", {"status": "archived"}, format="json")
    assert archived.json()["status"] == "archived"
    refused = add(member_a, session_id, "user", "hello")
    assert refused.status_code == 409
    assert "archived" in refused.json()["error"]["message"]
    assert (
        admin_a.patch(f"/api/v1/sessions/{session_id}/", {"status": "nope"}, format="json").status_code == 400
    )
    admin_a.patch(f"/api/v1/sessions/{session_id}/", {"status": "active"}, format="json")
    assert add(member_a, session_id, "user", "hello").status_code == 201


def test_the_list_filters_and_a_deleted_session_takes_its_messages(admin_a, member_a, agent, tenant_a):
    one = open_session(member_a, "chat-1", label="Holiday plans").json()["id"]
    open_session(member_a, "chat-2", user_id="bob")
    add(member_a, one, "user", "hi")
    keys = lambda query: [s["key"] for s in member_a.get(f"/api/v1/sessions/?{query}").json()["results"]]  # noqa: E731
    assert keys("user_id=bob") == ["chat-2"]
    assert keys("q=holiday") == ["chat-1"]
    assert keys("agent=bot&status=active")[0] == "chat-1"  # most recently active first
    assert member_a.get("/api/v1/sessions/?agent=nobody").status_code == 400
    assert member_a.get("/api/v1/sessions/not-a-uuid/").status_code == 404
    assert admin_a.delete(f"/api/v1/sessions/{one}/").status_code == 204
    assert not SessionMessage.objects.for_tenant(tenant_a).exists()
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="session.deleted").count() == 1


# --- tools --------------------------------------------------------------------------------------------


@pytest.fixture
def conversations(member_a, agent, tenant_a):
    """alice has two sessions with the bot, bob one; another agent has one for alice."""
    system = Actor.system(tenant_a)
    other = tenant_services.agent_create(actor=system, key="other", name="Other")
    made = {}
    for who, key, target in (("alice", "a-1", agent), ("alice", "a-2", agent), ("bob", "b-1", agent)):
        made[key], _ = services.session_open(actor=system, agent=target, key=key, user_id=who)
    services.session_open(actor=system, agent=other, key="o-1", user_id="alice")
    for n in range(1, 4):
        services.message_append(
            actor=system, session=made["a-1"], role="user", content=f"question {n}", source="api"
        )
    return made


def test_sessions_list_shows_this_agents_sessions_for_this_user_only(member_a, conversations):
    listed = call(member_a, "sessions_list", session_key="a-1", user_id="alice")
    assert listed["is_error"] is False
    text = listed["for_llm"]
    assert text.startswith("2 sessions of agent bot for user alice:")
    assert "- a-1: active, 3 messages" in text
    assert "(this session)" in text
    assert "a-2" in text
    assert "b-1" not in text
    assert "o-1" not in text
    assert "No sessions" in call(member_a, "sessions_list", user_id="carol")["for_llm"]
    assert call(member_a, "sessions_list", {"limit": 0}, user_id="alice")["is_error"] is True


def test_sessions_history_reads_the_last_messages_and_hides_other_users(member_a, conversations):
    history = call(member_a, "sessions_history", {"session_key": "a-1", "limit": 2}, user_id="alice")
    assert (
        history["for_llm"] == "Session a-1: messages 2-3 of 3\n\n#2 user: question 2\n\n#3 user: question 3"
    )
    for key, user in (("b-1", "alice"), ("o-1", "alice"), ("a-1", "bob"), ("a-1", "")):
        refused = call(member_a, "sessions_history", {"session_key": key}, user_id=user)
        assert refused["is_error"] is True
        assert "sessions_list shows the ones you can use" in refused["for_llm"]


def test_sessions_send_adds_a_user_message_to_another_session(member_a, conversations, tenant_a):
    sent = call(
        member_a,
        "sessions_send",
        {"session_key": "a-2", "message": "ping"},
        session_key="a-1",
        user_id="alice",
    )
    assert sent["is_error"] is False, sent
    assert sent["for_llm"].startswith("Sent to session a-2 as message #1")
    message = SessionMessage.objects.for_tenant(tenant_a).get(session=conversations["a-2"])
    assert (message.role, message.content, message.name, message.source) == (
        "user",
        "ping",
        "bot",
        "tool:sessions_send",
    )
    to_self = call(
        member_a, "sessions_send", {"session_key": "a-1", "message": "x"}, session_key="a-1", user_id="alice"
    )
    assert to_self["is_error"] is True
    to_bob = call(member_a, "sessions_send", {"session_key": "b-1", "message": "x"}, user_id="alice")
    assert to_bob["is_error"] is True
    too_long = call(
        member_a, "sessions_send", {"session_key": "a-2", "message": "x" * 20_001}, user_id="alice"
    )
    assert too_long["is_error"] is True
    assert SessionMessage.objects.for_tenant(tenant_a).filter(session=conversations["b-1"]).count() == 0


def test_session_status_describes_the_current_session(member_a, conversations):
    status = call(member_a, "session_status", session_key="a-1", user_id="alice")
    assert status["is_error"] is False
    assert status["for_llm"].startswith(
        "Session a-1 of agent bot\n- user: alice\n- status: active\n- messages: 3"
    )
    unknown = call(member_a, "session_status", session_key="fresh", user_id="alice")
    assert "has no recorded history yet" in unknown["for_llm"]
    assert call(member_a, "session_status")["is_error"] is True


def test_another_tenant_cannot_reach_the_sessions_through_tools(outsider, conversations, tenant_b):
    tenant_services.agent_create(actor=Actor.system(tenant_b), key="bot", name="B's bot")
    assert "No sessions" in call(outsider, "sessions_list", user_id="alice")["for_llm"]
    assert call(outsider, "sessions_history", {"session_key": "a-1"}, user_id="alice")["is_error"] is True
