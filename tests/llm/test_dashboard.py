"""The Providers pages through the Django test client: the list (live on the ``llm`` topic), adding and
editing a provider (the key write-only: blank keeps it), the live check, and deleting after a confirmation.
Administrators and owners only; another tenant's provider is 404 with nothing changed; the key never
appears in a page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from apps.llm.models import Provider
from tests.api.tenant_state import tenant_state
from tests.dashboard import conftest as personas
from tests.llm.fake_provider import HEADER_SECRET, KEY, FakeProvider

pytestmark = pytest.mark.django_db

# The dashboard personas of tests/dashboard/conftest.py.
admin, member, outsider = personas.admin, personas.member, personas.outsider


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    text = str(response.content.decode())
    assert KEY not in text
    assert HEADER_SECRET not in text
    return text


def form(fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    data = {
        "name": "main",
        "base_url": fake.base_url,
        "api_key": KEY,
        "extra_headers": json.dumps({"OpenAI-Organization": HEADER_SECRET}),
        "model_chat": "fake-chat",
        "model_image": "fake-image",
        "timeout_seconds": "45",
        "enabled": "on",
    }
    data.update(fields)
    return data


def test_admins_have_the_section_and_members_do_not(admin, member):
    nav = page(admin.get(reverse("dashboard:home")))
    assert reverse("dashboard:providers") in nav
    assert reverse("dashboard:providers") not in page(member.get(reverse("dashboard:home")))
    assert member.get(reverse("dashboard:providers")).status_code == 403


def test_the_list_shows_providers_live(admin, tenant_a, tenant_b, make_provider):
    make_provider(tenant_a)
    make_provider(tenant_b, "b-secret-provider")
    text = page(admin.get(reverse("dashboard:providers")))
    assert '<code data-field="name">main</code>' in text
    assert "default" in text
    assert f"key set (…{KEY[-4:]})" in text
    assert "image: <code>fake-image</code>" in text
    assert "b-secret-provider" not in text
    assert '"topic": "llm"' in text
    assert "tool-lists-live.js" in text


def test_adding_a_provider(admin, tenant_a, fake):
    response = admin.post(reverse("dashboard:provider_create"), form(fake))
    assert response.status_code == 302
    provider = Provider.objects.for_tenant(tenant_a).get()
    assert (provider.name, provider.api_key, provider.timeout_seconds) == ("main", KEY, 45)
    assert provider.extra_headers == {"OpenAI-Organization": HEADER_SECRET}
    assert (provider.chat_model, provider.image_model, provider.speech_model) == (
        "fake-chat",
        "fake-image",
        "",
    )
    assert provider.is_default is True


def test_a_refused_form_shows_why_and_saves_nothing(admin, tenant_a, fake):
    before = tenant_state(tenant_a)
    text = page(admin.post(reverse("dashboard:provider_create"), form(fake, base_url="https://10.1.2.3/v1")))
    assert "10.1.2.3 is in the blocked range" in text
    bad_model = page(admin.post(reverse("dashboard:provider_create"), form(fake, model_video="two words")))
    assert "video: at most 200 characters, no spaces" in bad_model
    bad_json = page(admin.post(reverse("dashboard:provider_create"), form(fake, extra_headers="[1]")))
    assert "Must be a JSON object" in bad_json
    assert tenant_state(tenant_a) == before


def test_editing_keeps_a_blank_key_and_can_clear_it(admin, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a)
    url = reverse("dashboard:provider_edit", args=[provider.pk])
    text = page(admin.get(url))
    assert f"A key ending in …{KEY[-4:]} is stored. Leave blank to keep it." in text
    assert "stored: OpenAI-Organization" in text
    response = admin.post(url, form(fake, api_key="", extra_headers="", model_chat="other-chat"))
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.api_key == KEY
    assert provider.extra_headers == {"OpenAI-Organization": HEADER_SECRET}
    assert provider.chat_model == "other-chat"
    admin.post(url, form(fake, api_key="", extra_headers="{}", clear_api_key="on"))
    provider.refresh_from_db()
    assert provider.api_key == ""
    assert provider.extra_headers == {}


def test_the_test_button_shows_the_models(admin, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a, models={"chat": "fake-chat", "video": "not-there"})
    text = page(admin.post(reverse("dashboard:provider_test", args=[provider.pk])))
    assert 'data-ok="true"' in text
    assert "<code>fake-vision</code>" in text
    assert "Configured but not offered" in text
    assert "<code>not-there</code>" in text
    assert fake.last("models").method == "GET"


def test_the_test_button_shows_an_error_without_the_key(admin, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a, api_key="sk-dashboard-wrong-key-1234")
    text = page(admin.post(reverse("dashboard:provider_test", args=[provider.pk])))
    assert 'data-ok="false"' in text
    assert "HTTP 401" in text
    assert "sk-dashboard-wrong-key-1234" not in text


def test_delete_asks_first(admin, tenant_a, make_provider):
    provider = make_provider(tenant_a)
    url = reverse("dashboard:provider_delete", args=[provider.pk])
    assert "Delete the provider main?" in page(admin.get(url))
    assert Provider.objects.for_tenant(tenant_a).exists()
    response = admin.post(url)
    assert response.status_code == 302
    assert not Provider.objects.for_tenant(tenant_a).exists()


def test_another_tenants_provider_is_404_with_nothing_changed(outsider, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a)
    before = tenant_state(tenant_a)
    for name in ("provider_edit", "provider_test", "provider_delete"):
        url = reverse(f"dashboard:{name}", args=[provider.pk])
        assert outsider.get(url).status_code == 404
        assert outsider.post(url, form(fake, name="hijacked")).status_code == 404
    assert 'data-field="name">main<' not in page(outsider.get(reverse("dashboard:providers")))
    assert tenant_state(tenant_a) == before
    assert not [h for h in fake.hits if h.path == "/v1/models"]


def test_members_cannot_change_anything(member, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a)
    before = tenant_state(tenant_a)
    for url in (
        reverse("dashboard:provider_create"),
        reverse("dashboard:provider_edit", args=[provider.pk]),
        reverse("dashboard:provider_test", args=[provider.pk]),
        reverse("dashboard:provider_delete", args=[provider.pk]),
    ):
        assert member.post(url, form(fake)).status_code == 403
    assert tenant_state(tenant_a) == before
