"""The Channels pages through the Django test client: the list (live on the ``messaging`` topic), adding
and editing a channel (the secret write-only: blank keeps it), the topics editor, the test send with its
result, the outbound log, and deleting after a confirmation. Administrators and owners only; another
tenant's channel is 404 with nothing changed; secrets never appear in a page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.messaging.models import Channel, OutboundMessage
from tests.api.tenant_state import tenant_state
from tests.dashboard import conftest as personas
from tests.messaging.fakes import HEADER_SECRET, TOKEN, WEBHOOK_SECRET, FakeTelegram, FakeWebhook

pytestmark = pytest.mark.django_db

# The dashboard personas of tests/dashboard/conftest.py.
admin, member, outsider = personas.admin, personas.member, personas.outsider


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    text = str(response.content.decode())
    for secret in (TOKEN, WEBHOOK_SECRET, HEADER_SECRET):
        assert secret not in text
    return text


def webhook_form(hook: FakeWebhook, **fields: Any) -> dict[str, Any]:
    data = {
        "name": "hooks",
        "kind": "webhook",
        "url": hook.url,
        "secret": WEBHOOK_SECRET,
        "extra_headers": json.dumps({"Authorization": HEADER_SECRET}),
        "default_chat_id": "general",
        "topics": "",
        "enabled": "on",
    }
    data.update(fields)
    return data


def test_admins_have_the_section_and_members_do_not(admin, member):
    nav = page(admin.get(reverse("dashboard:home")))
    assert reverse("dashboard:channels") in nav
    assert reverse("dashboard:channels") not in page(member.get(reverse("dashboard:home")))
    assert member.get(reverse("dashboard:channels")).status_code == 403
    assert member.post(reverse("dashboard:channel_create"), {"name": "x"}).status_code == 403


def test_the_list_is_live_and_shows_no_secret(admin, webhook_channel, telegram_channel):
    webhook_channel()
    telegram_channel()
    body = page(admin.get(reverse("dashboard:channels")))
    assert '<code data-field="name">hooks</code>' in body
    assert '<code data-field="name">tg</code>' in body
    assert f"secret set (…{TOKEN[-4:]})" in body
    assert "tool-lists-live.js" in body
    assert '"topic": "messaging"' in body
    assert '"prefix": "messaging.channel."' in body


def test_adding_a_webhook_channel(admin, tenant_a, hook):
    response = admin.post(reverse("dashboard:channel_create"), webhook_form(hook))
    assert response.status_code == 302, response.content.decode()[:2000]
    channel = Channel.objects.for_tenant(tenant_a).get()
    assert (channel.name, channel.kind, channel.url) == ("hooks", "webhook", hook.url)
    assert channel.secret == WEBHOOK_SECRET
    assert channel.extra_headers == {"Authorization": HEADER_SECRET}
    assert "Channel hooks added." in page(admin.get(reverse("dashboard:channels")))


def test_a_private_url_and_bad_topics_are_shown_on_the_form_with_nothing_saved(admin, tenant_a, hook):
    before = tenant_state(tenant_a)
    body = page(
        admin.post(reverse("dashboard:channel_create"), webhook_form(hook, url="https://10.1.2.3/in"))
    )
    assert "public https address" in body
    body = page(admin.post(reverse("dashboard:channel_create"), webhook_form(hook, topics='{"c": ["nope"]}')))
    assert "unknown tool" in body
    body = page(admin.post(reverse("dashboard:channel_create"), webhook_form(hook, topics="{not json")))
    assert "Not valid JSON" in body
    assert tenant_state(tenant_a) == before


def test_editing_keeps_a_blank_secret_and_saves_topics(admin, tenant_a, telegram_channel):
    channel = telegram_channel()
    url = reverse("dashboard:channel_edit", args=[channel.pk])
    body = page(admin.get(url))
    assert f"A secret ending in …{TOKEN[-4:]} is stored" in body
    topics = {"-100123:topic:45": ["datetime", "group:memory"]}
    data = {
        "name": "tg",
        "url": channel.url,
        "secret": "",
        "extra_headers": "",
        "default_chat_id": "-100123",
        "topics": json.dumps(topics),
        "enabled": "on",
    }
    response = admin.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    channel.refresh_from_db()
    assert channel.secret == TOKEN
    assert channel.topics == topics
    assert "datetime" in page(admin.get(url))


def test_the_test_send_shows_its_result_and_the_log_lists_it(admin, tenant_a, hook, webhook_channel):
    channel = webhook_channel()
    url = reverse("dashboard:channel_test", args=[channel.pk])
    assert "Send a test message" in page(admin.get(url))
    body = page(admin.post(url, {"chat_id": "ops"}))
    assert 'data-ok="true"' in body
    assert "msg-1" in body
    assert hook.sent[0]["chat_id"] == "ops"
    hook.status = 500
    body = page(admin.post(url, {"chat_id": ""}))
    assert 'data-ok="false"' in body
    assert "answered HTTP 500" in body
    log = page(admin.get(reverse("dashboard:channel_messages", args=[channel.pk])))
    assert log.count('data-field="status"') == 2
    assert 'data-status="failed"' in log
    assert "Toolgate test message from channel hooks." in log
    assert OutboundMessage.objects.for_tenant(tenant_a).count() == 2


def test_a_telegram_refusal_shows_without_the_token(admin, telegram: FakeTelegram, telegram_channel):
    channel = telegram_channel()
    telegram.refuse = "Bad Request: chat not found"
    body = page(admin.post(reverse("dashboard:channel_test", args=[channel.pk]), {"chat_id": "-1009"}))
    assert "chat not found" in body


def test_deleting_asks_first(admin, tenant_a, webhook_channel):
    channel = webhook_channel()
    url = reverse("dashboard:channel_delete", args=[channel.pk])
    assert "Delete the channel hooks?" in page(admin.get(url))
    assert Channel.objects.for_tenant(tenant_a).count() == 1
    assert admin.post(url).status_code == 302
    assert Channel.objects.for_tenant(tenant_a).count() == 0


def test_another_tenants_channel_is_404_with_nothing_changed(outsider, tenant_a, webhook_channel):
    channel = webhook_channel()
    before = tenant_state(tenant_a)
    for name in ("channel_edit", "channel_test", "channel_messages", "channel_delete"):
        url = reverse(f"dashboard:{name}", args=[channel.pk])
        assert outsider.get(url).status_code == 404, name
        if name != "channel_messages":  # a read-only page: POST is refused before any lookup
            assert outsider.post(url, {"name": "hijacked", "chat_id": "x"}).status_code == 404, name
    assert tenant_state(tenant_a) == before
    assert "hooks" not in outsider.get(reverse("dashboard:channels")).content.decode()
