"""Per-request tool allow lists from channel topics (``groupToolAllow``): a call whose context names a
configured channel and one of its chats or forum topics may list and run only the tools that entry
allows, intersected with the call's own ``tool_allow``."""

from __future__ import annotations

from typing import Any

import pytest

from apps.tenants.models import Tenant
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db

TOPIC = "-100123:topic:45"


def listed(client: Any, **params: str) -> set[str]:
    response = client.get("/api/v1/agents/bot/tools", {"format": "anthropic", **params})
    assert response.status_code == 200, response.content
    return {tool["name"] for tool in response.json()["tools"]}


def run(client: Any, tool: str, args: dict[str, Any], **context: Any) -> dict[str, Any]:
    body = {"agent": "bot", "tool": tool, "args": args, "context": context}
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


@pytest.fixture
def topics(agent, telegram_channel):  # type: ignore[no-untyped-def]
    return telegram_channel(topics={TOPIC: ["datetime", "group:memory"], "-100999": ["read_file"]})


def test_a_topic_narrows_the_tools_listing(member_a, topics):
    everything = listed(member_a)
    assert {"datetime", "write_file", "memory_search"} <= everything
    narrowed = listed(member_a, channel="tg", chat_id=TOPIC)
    assert "datetime" in narrowed
    assert "memory_search" in narrowed
    assert "write_file" not in narrowed
    assert narrowed < everything
    # Another topic of the chat, a chat without an entry and another channel name: unrestricted.
    assert listed(member_a, channel="tg", chat_id="-100123:topic:46") == everything
    assert listed(member_a, channel="tg", chat_id="-100555") == everything
    assert listed(member_a, channel="other", chat_id=TOPIC) == everything


def test_a_topic_falls_back_to_its_chats_entry(member_a, topics):
    assert listed(member_a, channel="tg", chat_id="-100999:topic:3") == {"read_file"}


def test_the_topic_list_is_intersected_with_the_calls_own(member_a, topics):
    assert listed(member_a, channel="tg", chat_id=TOPIC, tool_allow="datetime,write_file") == {"datetime"}


def test_a_tool_outside_the_topic_is_refused_like_any_denied_tool(member_a, tenant_a: Tenant, topics):
    before = tenant_state(tenant_a)
    result = run(member_a, "write_file", {"path": "x.txt", "content": "no"}, channel="tg", chat_id=TOPIC)
    assert result["is_error"] is True
    assert result["for_llm"] == "tool not allowed by policy: write_file"
    allowed = run(member_a, "datetime", {"timezone": "UTC"}, channel="tg", chat_id=TOPIC)
    assert allowed["is_error"] is False
    elsewhere = run(member_a, "write_file", {"path": "x.txt", "content": "ok"}, channel="tg", chat_id="-1001")
    assert elsewhere["is_error"] is False
    assert before["messaging.Channel"] == tenant_state(tenant_a)["messaging.Channel"]


def test_changing_the_topics_takes_effect_at_once(member_a, admin_a, topics):
    assert "write_file" not in listed(member_a, channel="tg", chat_id=TOPIC)
    response = admin_a.patch(
        f"/api/v1/channels/{topics.pk}/", {"topics": {TOPIC: ["write_file"]}}, format="json"
    )
    assert response.status_code == 200, response.content
    assert listed(member_a, channel="tg", chat_id=TOPIC) == {"write_file"}
    admin_a.patch(f"/api/v1/channels/{topics.pk}/", {"topics": {}}, format="json")
    assert "datetime" in listed(member_a, channel="tg", chat_id=TOPIC)
