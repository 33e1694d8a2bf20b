"""The channels API (/api/v1/channels/…): administrators add, read, change, test and delete channels
and read what was sent; secrets are write-only (answers show whether one is set and its last four
characters), never audited nor published; URLs pass the SSRF guard; topics name real tools and groups;
every change is audited and published on the ``messaging`` topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.audit.models import AuditEvent
from apps.messaging.models import Channel, OutboundMessage
from apps.realtime import events
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.messaging.fakes import HEADER_SECRET, TOKEN, WEBHOOK_SECRET, FakeWebhook

pytestmark = pytest.mark.django_db

URL = "/api/v1/channels/"
SECRETS = (TOKEN, WEBHOOK_SECRET, HEADER_SECRET)


def detail(channel: Channel | str) -> str:
    return f"{URL}{channel if isinstance(channel, str) else channel.pk}/"


def webhook_body(hook: FakeWebhook, **extra: Any) -> dict[str, Any]:
    return {
        "name": "hooks",
        "kind": "webhook",
        "url": hook.url,
        "secret": WEBHOOK_SECRET,
        "extra_headers": {"Authorization": HEADER_SECRET},
        "default_chat_id": "general",
        **extra,
    }


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "messaging"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def audit_text(tenant: Tenant) -> str:
    return json.dumps(list(AuditEvent.objects.for_tenant(tenant).values("verb", "data")), default=str)


# --- create and read --------------------------------------------------------------------------------------


def test_an_admin_adds_a_webhook_channel_and_the_secret_is_never_shown(admin_a, tenant_a, hook, published):
    response = admin_a.post(URL, webhook_body(hook), format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["name"] == "hooks"
    assert created["kind"] == "webhook"
    assert created["url"] == hook.url
    assert created["secret_set"] is True
    assert created["secret_last4"] == WEBHOOK_SECRET[-4:]
    assert created["extra_headers"] == ["Authorization"]
    assert created["enabled"] is True
    stored = Channel.objects.for_tenant(tenant_a).get()
    assert stored.secret == WEBHOOK_SECRET
    assert stored.extra_headers == {"Authorization": HEADER_SECRET}
    shown = admin_a.get(detail(stored)).json()
    assert shown == created
    listing = admin_a.get(URL).json()
    assert [c["name"] for c in listing["results"]] == ["hooks"]
    assert [e["type"] for e in published()] == ["messaging.channel.created"]
    assert AuditEvent.objects.for_tenant(tenant_a).filter(verb="messaging.channel.created").count() == 1
    no_secret(response.content.decode(), json.dumps(listing), json.dumps(published()), audit_text(tenant_a))


def test_secrets_are_encrypted_at_rest(admin_a, tenant_a, hook):
    from django.db import connection

    admin_a.post(URL, webhook_body(hook), format="json")
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret, extra_headers_encrypted FROM messaging_channel")
        row = cursor.fetchone()
    assert WEBHOOK_SECRET not in row[0]
    assert HEADER_SECRET not in row[1]


def test_a_telegram_channel_defaults_to_the_public_bot_api(admin_a):
    response = admin_a.post(URL, {"name": "tg", "kind": "telegram", "secret": TOKEN}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["url"] == "https://api.telegram.org"
    assert response.json()["secret_last4"] == TOKEN[-4:]
    assert TOKEN not in response.content.decode()


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"name": "tg", "kind": "telegram"}, "secret", "required"),
        ({"name": "tg", "kind": "telegram", "secret": "not-a-token"}, "secret", "bot token"),
        ({"name": "Bad Name", "kind": "webhook", "url": "https://x.example.com"}, "name", "lower-case"),
        ({"name": "x", "kind": "sms", "url": "https://x.example.com"}, "kind", "webhook, telegram"),
        ({"name": "x", "kind": "webhook"}, "url", "required"),
        ({"name": "x", "kind": "webhook", "url": "http://hooks.example.com/in"}, "url", "use https"),
        ({"name": "x", "kind": "webhook", "url": "https://127.0.0.1/in"}, "url", "public https"),
        ({"name": "x", "kind": "webhook", "url": "https://10.0.0.5/in"}, "url", "public https"),
        ({"name": "x", "kind": "webhook", "url": "https://169.254.169.254/"}, "url", "public https"),
        ({"name": "x", "kind": "webhook", "url": "https://[::1]/in"}, "url", "public https"),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "extra_headers": {"Host": "a"}},
            "extra_headers",
            "set by Toolgate",
        ),
        (
            {
                "name": "x",
                "kind": "webhook",
                "url": "https://h.example.com",
                "topics": {"c": ["no_such_tool"]},
            },
            "topics",
            "unknown tool",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "topics": {"c": ["group:nope"]}},
            "topics",
            "unknown group",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "topics": {"c": []}},
            "topics",
            "non-empty",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "topics": ["c"]},
            "topics",
            "object",
        ),
        (
            {"name": "x", "kind": "telegram", "secret": TOKEN, "topics": {"general": ["datetime"]}},
            "topics",
            "not a Telegram chat id",
        ),
        (
            {"name": "x", "kind": "telegram", "secret": TOKEN, "default_chat_id": "1:topic:x"},
            "default_chat_id",
            "not a Telegram chat id",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "agent_keys": ["ghost"]},
            "agent_keys",
            "no agent",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "enabled": "yes"},
            "enabled",
            "true or false",
        ),
        (
            {"name": "x", "kind": "webhook", "url": "https://h.example.com", "color": "red"},
            "color",
            "Unknown field",
        ),
    ],
)
def test_invalid_fields_are_refused_by_field_with_nothing_saved(admin_a, tenant_a, payload, field, words):
    before = tenant_state(tenant_a)
    response = admin_a.post(URL, payload, format="json")
    envelope = error(response, 400, "invalid")
    assert field in envelope["details"], envelope
    assert words in json.dumps(envelope["details"][field]), envelope
    assert tenant_state(tenant_a) == before


def test_a_name_in_use_is_a_conflict(admin_a, tenant_a, hook):
    assert admin_a.post(URL, webhook_body(hook), format="json").status_code == 201
    error(admin_a.post(URL, webhook_body(hook), format="json"), 409, "duplicate_channel")
    assert Channel.objects.for_tenant(tenant_a).count() == 1


def test_topics_accept_names_groups_and_patterns(admin_a, agent):
    topics = {"-100123:topic:45": ["datetime", "group:memory", "memory_*"], "-100123": ["group:goclaw"]}
    response = admin_a.post(
        URL,
        {"name": "tg", "kind": "telegram", "secret": TOKEN, "topics": topics, "agent_keys": ["bot"]},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["topics"] == topics
    assert response.json()["agent_keys"] == ["bot"]


# --- change and delete -------------------------------------------------------------------------------------


def test_a_blank_secret_is_kept_and_the_kind_cannot_change(admin_a, tenant_a, hook, published):
    channel_id = admin_a.post(URL, webhook_body(hook), format="json").json()["id"]
    response = admin_a.patch(detail(channel_id), {"default_chat_id": "ops", "enabled": False}, format="json")
    assert response.status_code == 200, response.content
    stored = Channel.objects.for_tenant(tenant_a).get()
    assert (stored.default_chat_id, stored.enabled, stored.secret) == ("ops", False, WEBHOOK_SECRET)
    updated = [e for e in published() if e["type"] == "messaging.channel.updated"]
    assert updated[-1]["data"]["changed"] == ["default_chat_id", "enabled"]
    response = admin_a.patch(detail(channel_id), {"secret": "another-signing-secret"}, format="json")
    assert response.json()["secret_last4"] == "cret"
    event = (
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(verb="messaging.channel.updated")
        .order_by("created_at")
        .last()
    )
    assert event is not None
    assert event.data["secret_changed"] is True
    assert "another-signing-secret" not in audit_text(tenant_a)
    envelope = error(admin_a.patch(detail(channel_id), {"kind": "telegram"}, format="json"), 400, "invalid")
    assert "cannot be changed" in envelope["message"]


def test_a_telegram_channel_keeps_its_token(admin_a, telegram_channel):
    channel = telegram_channel()
    envelope = error(admin_a.patch(detail(channel), {"secret": ""}, format="json"), 400, "invalid")
    assert "needs its bot token" in envelope["message"]


def test_a_url_changed_to_a_private_address_is_refused(admin_a, tenant_a, webhook_channel):
    channel = webhook_channel()
    before = tenant_state(tenant_a)
    response = admin_a.patch(detail(channel), {"url": "https://192.168.1.10/hook"}, format="json")
    assert "public https" in error(response, 400, "invalid")["details"]["url"][0]
    assert tenant_state(tenant_a) == before


def test_deleting_a_channel_keeps_its_log(admin_a, tenant_a, webhook_channel, published):
    channel = webhook_channel()
    admin_a.post(f"{detail(channel)}test", {}, format="json")
    assert admin_a.delete(detail(channel)).status_code == 204
    assert Channel.objects.for_tenant(tenant_a).count() == 0
    [row] = OutboundMessage.objects.for_tenant(tenant_a)
    assert (row.channel_id, row.channel_name) == (None, "hooks")
    assert published()[-1]["type"] == "messaging.channel.deleted"
    assert admin_a.get(detail(channel)).status_code == 404


# --- test send and the outbound log ------------------------------------------------------------------------


def test_a_test_send_reaches_the_webhook(admin_a, tenant_a, hook, webhook_channel, published):
    channel = webhook_channel()
    response = admin_a.post(f"{detail(channel)}test", {"chat_id": "ops"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True
    assert body["chat_id"] == "ops"
    assert body["message_id"] == "msg-1"
    assert isinstance(body["latency_ms"], int)
    assert hook.sent[0]["text"] == "Toolgate test message from channel hooks."
    assert hook.sent[0]["chat_id"] == "ops"
    [row] = OutboundMessage.objects.for_tenant(tenant_a)
    assert (row.kind, row.status) == ("test", "sent")
    assert published()[-1]["type"] == "messaging.message.sent"
    no_secret(response.content.decode(), json.dumps(published()))


def test_a_failed_test_send_answers_the_error(admin_a, tenant_a, telegram, telegram_channel):
    channel = telegram_channel()
    telegram.refuse = "Forbidden: bot was kicked from the group chat"
    response = admin_a.post(f"{detail(channel)}test", {}, format="json")
    body = response.json()
    assert body["ok"] is False
    assert "bot was kicked" in body["error"]
    assert telegram.calls[0][1]["chat_id"] == "-100123"
    no_secret(response.content.decode(), audit_text(tenant_a))
    assert OutboundMessage.objects.for_tenant(tenant_a).get().status == "failed"


def test_a_test_send_needs_a_chat(admin_a, tenant_a, telegram_channel):
    channel = telegram_channel(default_chat_id="")
    envelope = error(admin_a.post(f"{detail(channel)}test", {}, format="json"), 400, "invalid")
    assert "no default chat" in envelope["message"]
    assert OutboundMessage.objects.for_tenant(tenant_a).count() == 0


def test_the_outbound_log_pages_newest_first(admin_a, hook, webhook_channel, django_assert_max_num_queries):
    channel = webhook_channel()
    for chat in ("c1", "c2", "c3"):
        admin_a.post(f"{detail(channel)}test", {"chat_id": chat}, format="json")
    with django_assert_max_num_queries(12):
        page = admin_a.get(f"{detail(channel)}messages/", {"page_size": 2}).json()
    assert [m["chat_id"] for m in page["results"]] == ["c3", "c2"]
    assert page["results"][0]["status"] == "sent"
    assert page["results"][0]["text"] == "Toolgate test message from channel hooks."
    rest = admin_a.get(page["next"]).json()
    assert [m["chat_id"] for m in rest["results"]] == ["c1"]


def test_the_channel_list_is_bounded_in_queries(
    admin_a, hook, webhook_channel, django_assert_max_num_queries
):
    for n in range(5):
        webhook_channel(f"hooks-{n}")
    with django_assert_max_num_queries(10):
        response = admin_a.get(URL)
    assert len(response.json()["results"]) == 5


# --- personas ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "payload", "success"),
    [
        ("get", "", None, 200),
        ("get", "{id}/", None, 200),
        ("post", "", {"name": "added", "kind": "webhook", "url": "https://hooks.example.invalid/in"}, 201),
        ("patch", "{id}/", {"default_chat_id": "-100555"}, 200),
        ("delete", "{id}/", None, 204),
        ("post", "{id}/test", {}, 200),
        ("get", "{id}/messages/", None, 200),
    ],
)
def test_every_persona(request, tenant_a, method, path, payload, success):
    channel = Channel.objects.create(
        tenant=tenant_a,
        name="a-channel",
        kind=Channel.Kind.TELEGRAM,
        url="https://a-private-telegram.invalid",
        secret=TOKEN,
        default_chat_id="-100777",
    )
    check_personas(
        request,
        tenant_a,
        method=method,
        url=URL + path.format(id=channel.pk),
        body=payload,
        least=Role.ADMIN,
        success=success,
        outsider_status=200
        if path == "" and method == "get"
        else (201 if method == "post" and not path else 404),
        never_shown_to_outsider=("a-channel", "a-private-telegram", TOKEN),
    )


def test_members_cannot_read_channels(member_a, tenant_a, telegram_channel):
    channel = telegram_channel()
    error(member_a.get(detail(channel)), 403, "permission_denied")
    assert TOKEN not in member_a.get(URL).content.decode()
