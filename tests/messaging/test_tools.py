"""The message and create_forum_topic tools reached the way agent loops reach them (POST
/api/v1/runtime/execute), sending to a real webhook receiver and a fake Telegram Bot API on 127.0.0.2:
what is sent, the signature, forum threads, failures as clear tool errors logged as failed, the SSRF
guard at send time, and secrets kept out of every answer, audit record and log line."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.messaging import senders
from apps.messaging.models import Channel, OutboundMessage
from apps.tenants.models import Tenant
from tests.messaging.fakes import HEADER_SECRET, HOOK_PATH, TOKEN, WEBHOOK_SECRET

pytestmark = pytest.mark.django_db

SECRETS = (TOKEN, TOKEN.split(":", 1)[1], WEBHOOK_SECRET, HEADER_SECRET)


def call(client: Any, tool: str, args: dict[str, Any], **context: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"agent": "bot", "tool": tool, "args": args}
    if context:
        body["context"] = context
    response = client.post("/api/v1/runtime/execute", body, format="json")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


def no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def audit_text(tenant: Tenant) -> str:
    rows = AuditEvent.objects.for_tenant(tenant).values("verb", "data")
    return json.dumps(list(rows), default=str)


def logged(tenant: Tenant) -> list[OutboundMessage]:
    return list(OutboundMessage.objects.for_tenant(tenant).order_by("created_at"))


# --- webhook ----------------------------------------------------------------------------------------------


def test_message_posts_signed_json_to_the_webhook(member_a, tenant_a, agent, hook, webhook_channel):
    webhook_channel()
    result = call(
        member_a,
        "message",
        {"channel": "hooks", "chat_id": "ops", "text": "Build finished ✓", "silent": True},
        session_key="s-1",
        user_id="u-9",
    )
    assert result["is_error"] is False, result
    assert "Sent to ops on hooks (message id msg-1)" in result["for_llm"]
    [hit] = [h for h in hook.server.hits if h.path == HOOK_PATH]
    sent = json.loads(hit.body)
    assert {k: sent[k] for k in ("channel", "chat_id", "text", "agent", "session_key", "user_id")} == {
        "channel": "hooks",
        "chat_id": "ops",
        "text": "Build finished ✓",
        "agent": "bot",
        "session_key": "s-1",
        "user_id": "u-9",
    }
    assert sent["silent"] is True
    assert sent["sent_at"].endswith("+00:00")
    expected = hmac.new(WEBHOOK_SECRET.encode(), hit.body, hashlib.sha256).hexdigest()
    assert hit.headers["x-toolgate-signature"] == f"sha256={expected}"
    assert hit.headers["authorization"] == HEADER_SECRET
    [row] = logged(tenant_a)
    assert (row.status, row.chat_id, row.agent_key, row.provider_message_id) == (
        "sent",
        "ops",
        "bot",
        "msg-1",
    )
    assert row.text == "Build finished ✓"
    assert row.text_sha256 == hashlib.sha256("Build finished ✓".encode()).hexdigest()
    assert row.text_bytes == len("Build finished ✓".encode())
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="messaging.message.sent").count() == 1
    no_secret(json.dumps(result), audit_text(tenant_a))


def test_the_call_context_gives_the_channel_and_chat(member_a, agent, hook, webhook_channel):
    webhook_channel()
    result = call(member_a, "message", {"text": "hi"}, channel="hooks", chat_id="room-7")
    assert result["is_error"] is False, result
    assert hook.sent[-1]["chat_id"] == "room-7"
    # Another channel named in the arguments: the call's chat belongs to its own channel, so the
    # channel's default chat is used.
    webhook_channel("other")
    call(member_a, "message", {"channel": "other", "text": "hi"}, channel="hooks", chat_id="room-7")
    assert (hook.sent[-1]["channel"], hook.sent[-1]["chat_id"]) == ("other", "general")


def test_an_unsigned_webhook_gets_no_signature_header(member_a, agent, hook, webhook_channel):
    webhook_channel(secret="", extra_headers={})
    assert call(member_a, "message", {"channel": "hooks", "text": "hi"})["is_error"] is False
    assert "x-toolgate-signature" not in hook.server.hits[-1].headers


def test_a_webhook_error_status_is_a_clear_tool_error_logged_as_failed(
    member_a, tenant_a, agent, hook, webhook_channel
):
    webhook_channel()
    hook.status = 503
    hook.answer = f"upstream down; token {WEBHOOK_SECRET} ".encode() + b"x" * 5000
    result = call(member_a, "message", {"channel": "hooks", "text": "hi"})
    assert result["is_error"] is True
    assert (
        "message failed: the webhook of channel hooks answered HTTP 503: upstream down" in result["for_llm"]
    )
    assert len(result["for_llm"]) < 600
    [row] = logged(tenant_a)
    assert row.status == "failed"
    assert "HTTP 503" in row.error
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="messaging.message.failed").count() == 1
    no_secret(json.dumps(result), row.error, audit_text(tenant_a))


def test_a_webhook_that_does_not_answer_in_time_fails_clearly(
    member_a, tenant_a, agent, hook, webhook_channel, monkeypatch
):
    monkeypatch.setattr(senders, "SEND_TIMEOUT", 0.5)
    hook.delay = 2.0
    webhook_channel()
    result = call(member_a, "message", {"channel": "hooks", "text": "hi"})
    assert result["is_error"] is True
    assert "did not answer within" in result["for_llm"]
    assert logged(tenant_a)[0].status == "failed"


def test_a_channel_url_that_turned_private_is_refused_at_send_time(
    member_a, tenant_a, agent, hook, webhook_channel, settings
):
    webhook_channel()
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""  # 127.0.0.2 is loopback again
    result = call(member_a, "message", {"channel": "hooks", "text": "hi"})
    assert result["is_error"] is True
    assert "refused" in result["for_llm"]
    assert "public address" in result["for_llm"]
    assert not [h for h in hook.server.hits if h.path == HOOK_PATH]
    assert logged(tenant_a)[0].status == "failed"


# --- telegram ---------------------------------------------------------------------------------------------


def test_message_to_a_telegram_forum_topic_sends_its_thread(
    member_a, tenant_a, agent, telegram, telegram_channel, caplog
):
    caplog.set_level(logging.DEBUG)
    telegram_channel()
    result = call(
        member_a,
        "message",
        {"channel": "tg", "chat_id": "-100123:topic:45", "text": "hello", "reply_to": "12"},
    )
    assert result["is_error"] is False, result
    assert "message id 501" in result["for_llm"]
    [(method, payload)] = telegram.calls
    assert method == "sendMessage"
    assert payload["chat_id"] == "-100123"
    assert payload["message_thread_id"] == 45
    assert payload["text"] == "hello"
    assert payload["reply_parameters"]["message_id"] == 12
    assert logged(tenant_a)[0].provider_message_id == "501"
    no_secret(json.dumps(result), audit_text(tenant_a), caplog.text)
    assert "/bot[redacted]/sendMessage" in caplog.text  # httpx's request line, with the token scrubbed


def test_telegram_default_chat_without_a_topic(member_a, agent, telegram, telegram_channel):
    telegram_channel()
    assert call(member_a, "message", {"channel": "tg", "text": "hi"})["is_error"] is False
    assert "message_thread_id" not in telegram.calls[0][1]
    assert telegram.calls[0][1]["chat_id"] == "-100123"


def test_telegram_ok_false_is_a_clear_error_without_the_token(
    member_a, tenant_a, agent, telegram, telegram_channel, caplog
):
    caplog.set_level(logging.DEBUG)
    telegram_channel()
    telegram.refuse = "Bad Request: message thread not found"
    result = call(member_a, "message", {"channel": "tg", "chat_id": "-100123:topic:9", "text": "hi"})
    assert result["is_error"] is True
    assert (
        "Telegram (tg) refused sendMessage (HTTP 400): Bad Request: message thread not found"
        in result["for_llm"]
    )
    row = logged(tenant_a)[0]
    assert row.status == "failed"
    no_secret(json.dumps(result), row.error, audit_text(tenant_a), caplog.text)


def test_a_wrong_token_is_a_clear_error(member_a, agent, telegram, telegram_channel):
    telegram_channel(secret="987654321:AAEanotherTokenThatIsWrong_xyz")
    result = call(member_a, "message", {"channel": "tg", "text": "hi"})
    assert result["is_error"] is True
    assert "Telegram (tg) answered HTTP 404 to sendMessage" in result["for_llm"]
    assert "AAEanotherTokenThatIsWrong_xyz" not in result["for_llm"]


def test_create_forum_topic_answers_the_thread_and_the_chat_id_to_use(
    member_a, tenant_a, agent, telegram, telegram_channel
):
    telegram_channel()
    result = call(
        member_a, "create_forum_topic", {"channel": "tg", "name": "Incidents", "icon_color": 7322096}
    )
    assert result["is_error"] is False, result
    assert "thread id 77" in result["for_llm"]
    assert "-100123:topic:77" in result["for_llm"]
    assert telegram.calls == [
        ("createForumTopic", {"chat_id": "-100123", "name": "Incidents", "icon_color": 7322096})
    ]
    [row] = logged(tenant_a)
    assert (row.kind, row.status, row.provider_message_id) == ("forum_topic", "sent", "77")
    # The composite id it answered sends into the new topic.
    call(member_a, "message", {"channel": "tg", "chat_id": "-100123:topic:77", "text": "first"})
    assert telegram.calls[-1][1]["message_thread_id"] == 77


def test_create_forum_topic_needs_a_telegram_channel(member_a, agent, hook, webhook_channel):
    webhook_channel()
    result = call(member_a, "create_forum_topic", {"channel": "hooks", "name": "x"})
    assert result["is_error"] is True
    assert "forum topics need a Telegram one" in result["for_llm"]


def test_create_forum_topic_refusal_is_logged_as_failed(
    member_a, tenant_a, agent, telegram, telegram_channel
):
    telegram_channel()
    telegram.refuse = "Bad Request: the chat is not a forum"
    result = call(member_a, "create_forum_topic", {"channel": "tg", "name": "x"})
    assert result["is_error"] is True
    assert "the chat is not a forum" in result["for_llm"]
    assert logged(tenant_a)[0].status == "failed"


# --- refusals before sending -----------------------------------------------------------------------------


def test_unknown_disabled_and_forbidden_channels_are_clear_errors(
    member_a, tenant_a, agent, hook, webhook_channel
):
    result = call(member_a, "message", {"text": "hi"})
    assert result["is_error"] is True
    assert "no channel" in result["for_llm"]
    assert "none is configured" in result["for_llm"]
    webhook_channel()
    result = call(member_a, "message", {"channel": "nope", "text": "hi"})
    assert "unknown channel 'nope'; configured: hooks" in result["for_llm"]
    webhook_channel("off", enabled=False)
    assert "is disabled" in call(member_a, "message", {"channel": "off", "text": "hi"})["for_llm"]
    from apps.accounts import services as tenant_services
    from apps.tenants.actors import Actor

    tenant_services.agent_create(actor=Actor.system(tenant_a), key="other", name="Other")
    webhook_channel("only-other", agent_keys=["other"])
    result = call(member_a, "message", {"channel": "only-other", "text": "hi"})
    assert "this agent may not use the channel only-other" in result["for_llm"]
    webhook_channel("no-chat", default_chat_id="")
    result = call(member_a, "message", {"channel": "no-chat", "text": "hi"})
    assert "no chat: give chat_id" in result["for_llm"]
    assert not [h for h in hook.server.hits if h.path == HOOK_PATH]
    assert logged(tenant_a) == []


def test_text_over_telegrams_limit_is_refused(member_a, tenant_a, agent, telegram, telegram_channel):
    telegram_channel()
    result = call(member_a, "message", {"channel": "tg", "text": "x" * 4097})
    assert result["is_error"] is True
    assert "4096" in result["for_llm"]
    assert telegram.calls == []
    assert call(member_a, "message", {"channel": "tg", "text": "x" * 4096})["is_error"] is False


def test_a_bad_telegram_chat_id_is_refused(member_a, agent, telegram, telegram_channel):
    telegram_channel()
    result = call(member_a, "message", {"channel": "tg", "chat_id": "../getMe?", "text": "hi"})
    assert result["is_error"] is True
    assert "is not a Telegram chat id" in result["for_llm"]
    assert telegram.calls == []


def test_another_tenants_channel_is_unknown(member_a, tenant_b, agent, hook, webhook_channel):
    webhook_channel("b-hooks", tenant=tenant_b)
    result = call(member_a, "message", {"channel": "b-hooks", "text": "hi"})
    assert result["is_error"] is True
    assert "unknown channel" in result["for_llm"]
    assert Channel.objects.for_tenant(tenant_b).count() == 1
