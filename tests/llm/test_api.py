"""The providers API (/api/v1/llm/providers/…): administrators add, read, change, test and delete
providers; the key is write-only (answers show whether one is set and its last four characters), never
audited nor published; base URLs pass the SSRF guard; one default per tenant; every change is audited,
published on the ``llm`` topic and, when it changes what the tenant's tools can use, raises its
configuration version."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_postgres.models import Message

from apps.audit.models import AuditEvent
from apps.llm.models import Provider
from apps.realtime import events
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.personas import check_personas, error
from tests.api.tenant_state import tenant_state
from tests.llm.conftest import ALL_MODELS
from tests.llm.fake_provider import HEADER_SECRET, KEY, PUBLIC_IP, FakeProvider
from tests.local_http import serving

pytestmark = pytest.mark.django_db

URL = "/api/v1/llm/providers/"


def detail(provider: Provider | str) -> str:
    return f"{URL}{provider if isinstance(provider, str) else provider.pk}/"


def body(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {
        "name": "main",
        "base_url": fake.base_url,
        "api_key": KEY,
        "extra_headers": {"OpenAI-Organization": HEADER_SECRET},
        "models": {"chat": "fake-chat", "image": "fake-image"},
        **extra,
    }


@pytest.fixture
def published(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(tenant_a.pk, "llm"), channel)

    def read() -> list[dict[str, Any]]:
        rows = Message.objects.filter(channel=channel).order_by("id").values_list("message", flat=True)
        return [events.public(layer.deserialize(bytes(row))["event"]) for row in rows]

    return read


def no_secret(*texts: str) -> None:
    for text in texts:
        assert KEY not in text
        assert HEADER_SECRET not in text


def audit_text(tenant: Tenant) -> str:
    return json.dumps(list(AuditEvent.objects.for_tenant(tenant).values("verb", "data")), default=str)


# --- create and read --------------------------------------------------------------------------------------


def test_an_admin_adds_a_provider_and_the_key_is_never_shown(admin_a, tenant_a, fake, published):
    response = admin_a.post(URL, body(fake), format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["name"] == "main"
    assert created["kind"] == "openai_compatible"
    assert created["base_url"] == fake.base_url
    assert created["api_key_set"] is True
    assert created["api_key_last4"] == KEY[-4:]
    assert created["extra_headers"] == ["OpenAI-Organization"]
    assert created["models"] == {
        "chat": "fake-chat",
        "vision": "",
        "image": "fake-image",
        "speech": "",
        "transcription": "",
        "audio": "",
        "video": "",
        "document": "",
    }
    assert created["timeout_seconds"] == 60
    assert created["enabled"] is True
    assert created["is_default"] is True  # the first provider
    listed = admin_a.get(URL).json()
    one = admin_a.get(detail(created["id"])).json()
    assert listed["results"] == [one]
    no_secret(response.content.decode(), json.dumps(listed), json.dumps(one), audit_text(tenant_a))
    assert [e["type"] for e in published()] == ["llm.provider.created"]
    no_secret(json.dumps(published()))
    row = Provider.objects.for_tenant(tenant_a).get()
    assert row.api_key == KEY
    assert row.extra_headers == {"OpenAI-Organization": HEADER_SECRET}


def test_a_short_key_shows_no_last_four(admin_a, fake):
    created = admin_a.post(URL, body(fake, api_key="sk-short"), format="json").json()
    assert created["api_key_set"] is True
    assert created["api_key_last4"] == ""


def test_the_list_is_bounded_in_queries(admin_a, tenant_a, make_provider, django_assert_max_num_queries):
    for index in range(5):
        make_provider(tenant_a, f"p{index}")
    with django_assert_max_num_queries(4):
        answer = admin_a.get(URL).json()
    assert [p["name"] for p in answer["results"]] == ["p0", "p1", "p2", "p3", "p4"]  # the default first


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"name": "Bad Name"}, "name", "lower-case letters"),
        ({"base_url": "ftp://api.example.com/v1"}, "base_url", "scheme 'ftp' is not allowed"),
        ({"base_url": "http://127.0.0.1:9/v1"}, "base_url", "127.0.0.1 is in the blocked range"),
        ({"base_url": "https://10.0.0.7/v1"}, "base_url", "10.0.0.7 is in the blocked range"),
        ({"base_url": "https://169.254.169.254/v1"}, "base_url", "cloud metadata address"),
        ({"base_url": "https://user:pw@api.example.com/v1"}, "base_url", "user name or password"),
        ({"base_url": "https://api.llm.invalid/v1?x=1"}, "base_url", "no query or fragment"),
        ({"base_url": "http://api.llm.invalid/v1"}, "base_url", "use https"),
        ({"extra_headers": {"Authorization": "x"}}, "extra_headers", "set by Toolgate itself"),
        ({"extra_headers": {"X-A": "line\nbreak"}}, "extra_headers", "at most 2000 characters"),
        ({"extra_headers": {f"X-{i}": "v" for i in range(21)}}, "extra_headers", "at most 20 headers"),
        ({"models": {"smell": "m"}}, "models", "'smell' is no capability"),
        ({"models": {"chat": "two words"}}, "models", "no spaces"),
        ({"models": {"chat": "m" * 201}}, "models", "at most 200 characters"),
        ({"timeout_seconds": 0}, "timeout_seconds", "from 1 to 600"),
        ({"timeout_seconds": 601}, "timeout_seconds", "from 1 to 600"),
        ({"timeout_seconds": "60"}, "timeout_seconds", "from 1 to 600"),
        ({"enabled": "yes"}, "enabled", "true or false"),
        ({"kind": "anthropic"}, "kind", "openai_compatible"),
        ({"api_key": "sk-\x01"}, "api_key", "no line breaks or control characters"),
        ({"surprise": 1}, "surprise", "Unknown field."),
    ],
)
def test_invalid_fields_are_400_by_field_with_nothing_saved(admin_a, tenant_a, fake, extra, field, message):
    before = tenant_state(tenant_a)
    envelope = error(admin_a.post(URL, body(fake, **extra), format="json"), 400, "invalid")
    assert message in json.dumps(envelope["details"][field])
    assert tenant_state(tenant_a) == before


def test_a_name_in_use_is_409(admin_a, tenant_a, fake, make_provider):
    make_provider(tenant_a, "main")
    error(admin_a.post(URL, body(fake), format="json"), 409, "duplicate_provider")
    other = make_provider(tenant_a, "other")
    error(admin_a.patch(detail(other), {"name": "main"}, format="json"), 409, "duplicate_provider")


def test_the_same_name_in_another_tenant_is_fine(admin_a, tenant_b, fake, make_provider):
    make_provider(tenant_b, "main")
    assert admin_a.post(URL, body(fake), format="json").status_code == 201


# --- update, default, delete ------------------------------------------------------------------------------


def test_the_key_is_kept_replaced_or_cleared(admin_a, tenant_a, make_provider):
    provider = make_provider(tenant_a)
    kept = admin_a.patch(detail(provider), {"timeout_seconds": 30}, format="json").json()
    assert kept["api_key_set"] is True
    assert Provider.objects.for_tenant(tenant_a).get().api_key == KEY
    replaced = admin_a.patch(detail(provider), {"api_key": "sk-new-key-value-abcd1234"}, format="json").json()
    assert replaced["api_key_last4"] == "1234"
    cleared = admin_a.patch(detail(provider), {"api_key": ""}, format="json").json()
    assert cleared["api_key_set"] is False
    updates = (
        AuditEvent.objects.for_tenant(tenant_a).filter(verb="llm.provider.updated").order_by("created_at")
    )
    assert [(e.data["changed"], e.data["api_key_changed"]) for e in updates] == [
        (["timeout_seconds"], False),
        (["api_key"], True),
        (["api_key", "api_key_set"], True),
    ]
    assert "sk-new-key-value-abcd1234" not in audit_text(tenant_a)


def test_models_change_only_where_named(admin_a, tenant_a, make_provider):
    provider = make_provider(tenant_a)
    answer = admin_a.patch(detail(provider), {"models": {"image": "", "video": "v2"}}, format="json").json()
    assert answer["models"] == {**ALL_MODELS, "image": "", "video": "v2", "document": ""}


def test_one_default_per_tenant(admin_a, tenant_a, make_provider):
    first = make_provider(tenant_a, "first")
    second = make_provider(tenant_a, "second")
    assert Provider.objects.for_tenant(tenant_a).get(pk=second.pk).is_default is False
    answer = admin_a.patch(detail(second), {"is_default": True}, format="json").json()
    assert answer["is_default"] is True
    assert list(
        Provider.objects.for_tenant(tenant_a).filter(is_default=True).values_list("name", flat=True)
    ) == ["second"]
    assert admin_a.get(detail(first)).json()["is_default"] is False
    created = admin_a.post(
        URL, {"name": "third", "base_url": "https://api.llm.invalid/v1", "is_default": True}, format="json"
    ).json()
    assert created["is_default"] is True
    assert Provider.objects.for_tenant(tenant_a).filter(is_default=True).count() == 1


def test_changes_to_what_tools_can_use_raise_the_config_version(admin_a, tenant_a, make_provider):
    def version() -> int:
        return Tenant.objects.get(pk=tenant_a.pk).config_version

    start = version()
    provider = make_provider(tenant_a, models={"chat": "c"})
    assert version() == start + 1
    admin_a.patch(detail(provider), {"timeout_seconds": 10}, format="json")
    assert version() == start + 1  # nothing a tool could use changed
    admin_a.patch(detail(provider), {"models": {"image": "i"}}, format="json")
    assert version() == start + 2
    admin_a.patch(detail(provider), {"enabled": False}, format="json")
    assert version() == start + 3
    admin_a.delete(detail(provider))
    assert version() == start + 3  # a disabled provider served nothing


def test_delete_removes_it_audited_and_published(admin_a, tenant_a, make_provider, published):
    provider = make_provider(tenant_a)
    assert admin_a.delete(detail(provider)).status_code == 204
    assert not Provider.objects.for_tenant(tenant_a).exists()
    assert admin_a.get(detail(provider)).status_code == 404
    assert [e["type"] for e in published()][-1] == "llm.provider.deleted"
    deleted = AuditEvent.objects.for_tenant(tenant_a).get(verb="llm.provider.deleted")
    assert deleted.data["name"] == "main"
    no_secret(audit_text(tenant_a))


# --- the live check ---------------------------------------------------------------------------------------


def test_the_live_check_lists_the_models(admin_a, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a, models={"chat": "fake-chat", "image": "not-offered"})
    answer = admin_a.post(detail(provider) + "test").json()
    assert answer["ok"] is True
    assert answer["error"] == ""
    assert "fake-chat" in answer["models"]
    assert answer["missing_models"] == ["not-offered"]
    assert answer["latency_ms"] >= 0
    hit = fake.last("models")
    assert (hit.method, hit.headers["authorization"]) == ("GET", f"Bearer {KEY}")
    tested = AuditEvent.objects.for_tenant(tenant_a).get(verb="llm.provider.tested")
    assert tested.data["ok"] is True


def test_the_live_check_reports_a_refused_key_without_it(admin_a, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a, api_key="sk-refused-key-99887766")
    answer = admin_a.post(detail(provider) + "test").json()
    assert answer["ok"] is False
    assert answer["status"] == 401
    assert answer["error"].startswith(
        "the provider main answered HTTP 401 to models (the API key was refused"
    )
    assert "sk-refused-key-99887766" not in json.dumps(answer)
    assert "[redacted]" in answer["error"]
    assert "sk-refused-key-99887766" not in audit_text(tenant_a)


def test_the_live_check_of_an_unreachable_or_private_provider(admin_a, tenant_a, settings):
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with serving("127.0.0.1") as internal:
        provider = Provider.objects.create(tenant=tenant_a, name="inside", base_url=internal.url("/v1"))
        answer = admin_a.post(detail(provider) + "test").json()
        assert internal.hits == []
    assert answer["ok"] is False
    assert answer["error"].startswith("the provider inside is refused (blocked: 127.0.0.1")


def test_http_is_allowed_only_inside_the_test_networks(admin_a, settings):
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    assert (
        admin_a.post(
            URL, {"name": "local", "base_url": f"http://{PUBLIC_IP}:9/v1"}, format="json"
        ).status_code
        == 201
    )
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    envelope = error(
        admin_a.post(URL, {"name": "local2", "base_url": f"http://{PUBLIC_IP}:9/v1"}, format="json"),
        400,
        "invalid",
    )
    assert "blocked range 127.0.0.0/8" in envelope["details"]["base_url"][0]


# --- personas ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "payload", "success"),
    [
        ("get", "", None, 200),
        ("get", "{id}/", None, 200),
        ("post", "", {"name": "added", "base_url": "https://api.llm.invalid/v1"}, 201),
        ("patch", "{id}/", {"timeout_seconds": 5}, 200),
        ("delete", "{id}/", None, 204),
        ("post", "{id}/test", None, 200),
    ],
)
def test_every_persona(request, tenant_a, method, path, payload, success):
    provider = Provider.objects.create(
        tenant=tenant_a, name="a-provider", base_url="https://a-private-llm.invalid/v1", api_key=KEY
    )
    url = URL + path.format(id=provider.pk)
    check_personas(
        request,
        tenant_a,
        method=method,
        url=url,
        body=payload,
        least=Role.ADMIN,
        success=success,
        outsider_status=200
        if path == "" and method == "get"
        else (201 if method == "post" and not path else 404),
        never_shown_to_outsider=("a-provider", "a-private-llm", KEY),
    )
