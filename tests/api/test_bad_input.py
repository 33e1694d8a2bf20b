"""Hostile and broken input gets the error envelope with a precise message, and nothing is written."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.accounts import services
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def _error(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    error: dict[str, Any] = body["error"]
    return error


def test_malformed_json(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    error = _error(
        owner_a.post("/api/v1/agents/", '{"key": "x",', content_type="application/json"),
        400,
        "malformed_json",
    )
    assert "JSON parse error" in error["message"]
    assert tenant_state(tenant_a) == before


def test_body_that_is_not_an_object(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    error = _error(owner_a.post("/api/v1/agents/", [1, 2], format="json"), 400, "invalid")
    assert error["message"] == "Expected a JSON object, got list."
    assert tenant_state(tenant_a) == before


def test_wrong_types_name_each_field(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    response = owner_a.post(
        "/api/v1/agents/", {"key": 7, "name": {"x": 1}, "type": "robot", "settings": "no"}, format="json"
    )
    error = _error(response, 400, "invalid")
    assert error["details"] == {
        "key": ["Must be a string, got number."],
        "name": ["Must be a string, got object."],
    }
    assert error["message"] == "key: Must be a string, got number."
    assert tenant_state(tenant_a) == before
    response = owner_a.post(
        "/api/v1/agents/", {"key": "ok", "name": "Ok", "type": "robot", "settings": "no"}, format="json"
    )
    error = _error(response, 400, "invalid")
    assert error["details"]["type"] == ['"robot" is not a valid choice.']
    assert error["details"]["settings"] == ["Must be a JSON object."]
    assert tenant_state(tenant_a) == before


def test_unknown_fields_are_refused(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    error = _error(
        owner_a.post(
            "/api/v1/agents/", {"key": "ok", "name": "Ok", "tenant": "other", "is_admin": True}, format="json"
        ),
        400,
        "invalid",
    )
    assert error["details"] == {"is_admin": ["Unknown field."], "tenant": ["Unknown field."]}
    assert error["message"] == "is_admin: Unknown field."
    assert tenant_state(tenant_a) == before


def test_oversized_body_is_413_before_parsing(owner_a, tenant_a, settings):
    before = tenant_state(tenant_a)
    big = '{"key": "big", "name": "' + "x" * (settings.MAX_REQUEST_BODY_BYTES + 10) + '"}'
    error = _error(
        owner_a.post("/api/v1/agents/", big, content_type="application/json"), 413, "body_too_large"
    )
    assert str(settings.MAX_REQUEST_BODY_BYTES) in error["message"]
    assert tenant_state(tenant_a) == before


def test_oversized_settings_json_is_refused(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    response = owner_a.post(
        "/api/v1/agents/", {"key": "s", "name": "S", "settings": {"blob": "x" * 70000}}, format="json"
    )
    error = _error(response, 400, "invalid")
    assert error["details"]["settings"] == ["Must be at most 65536 bytes of JSON."]
    assert tenant_state(tenant_a) == before


def test_overlong_strings_are_refused(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    error = _error(
        owner_a.post("/api/v1/agents/", {"key": "k" * 65, "name": "n"}, format="json"), 400, "invalid"
    )
    assert "key" in error["details"]
    assert tenant_state(tenant_a) == before


def test_form_encoded_bodies_are_unsupported(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    _error(
        owner_a.post("/api/v1/agents/", "key=x&name=y", content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bearer nonsense", "Malformed API key: expected tgk_<prefix>_<secret>."),
        ("Basic dXNlcjpwYXNz", "Use 'Authorization: Bearer <api key>'."),
        ("Bearer tgk_AAAAAAAA_" + "A" * 43, "Invalid, revoked or expired API key."),
    ],
)
def test_bad_keys(header, message, anonymous, tenant_a):
    anonymous.credentials(HTTP_AUTHORIZATION=header)
    error = _error(anonymous.get("/api/v1/me/"), 401, "authentication_failed")
    assert error["message"] == message


def test_a_key_with_the_right_prefix_but_wrong_secret_is_refused(anonymous, tenant_a):
    raw = factories.make_api_key(tenant_a, Role.ADMIN)
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    _error(anonymous.get("/api/v1/me/"), 401, "authentication_failed")


def test_revoked_and_expired_keys_are_refused(tenant_a):
    system = Actor.system(tenant_a)
    revoked_key, revoked_raw = services.api_key_create(actor=system, name="revoked", role=Role.ADMIN)
    services.api_key_revoke(actor=system, api_key=revoked_key)
    expired_key, expired_raw = services.api_key_create(
        actor=system, name="expired", role=Role.ADMIN, expires_at=timezone.now() + dt.timedelta(hours=1)
    )
    ApiKey.objects.for_tenant(tenant_a).filter(pk=expired_key.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    for raw in (revoked_raw, expired_raw):
        _error(factories.key_client(raw).get("/api/v1/me/"), 401, "authentication_failed")


def test_keys_of_a_suspended_tenant_are_refused(tenant_a):
    raw = factories.make_api_key(tenant_a, Role.OWNER)
    Tenant.objects.filter(pk=tenant_a.pk).update(status=Tenant.Status.SUSPENDED)
    _error(factories.key_client(raw).get("/api/v1/me/"), 403, "tenant_suspended")


def test_weak_password_for_a_new_member_writes_nothing(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    users = get_user_model().objects.count()
    error = _error(
        owner_a.post("/api/v1/memberships/", {"email": "weak@a.test", "password": "123"}, format="json"),
        400,
        "invalid",
    )
    assert error["message"].startswith("password:")
    assert tenant_state(tenant_a) == before
    assert get_user_model().objects.count() == users


def test_invalid_audit_filters(admin_a):
    error = _error(admin_a.get("/api/v1/audit/events/?since=yesterday&actor_kind=robot"), 400, "invalid")
    assert set(error["details"]) == {"since", "actor_kind"}


def test_unknown_route_under_api_is_enveloped(admin_a):
    _error(admin_a.get("/api/v1/no-such-thing/"), 404, "not_found")


def test_method_not_allowed(admin_a):
    _error(admin_a.put("/api/v1/agents/", {}, format="json"), 405, "method_not_allowed")


@pytest.mark.parametrize("depth", [65, 3000, 100_000])
def test_deeply_nested_bodies_are_refused_not_crashed(owner_a, member_a, tenant_a, depth):
    before = tenant_state(tenant_a)
    body = '{"key": "deep", "name": "Deep", "settings": ' + '{"a": ' * depth + "1" + "}" * depth + "}"
    response = owner_a.post("/api/v1/agents/", body, content_type="application/json")
    error = _error(response, 400, "malformed_json")
    assert "nested deeper than 64 levels" in error["message"]
    args = '{"agent": "x", "tool": "datetime", "args": ' + "[" * depth + "]" * depth + "}"
    error = _error(
        member_a.post("/api/v1/runtime/execute", args, content_type="application/json"), 400, "malformed_json"
    )
    assert tenant_state(tenant_a) == before


def test_nesting_up_to_the_bound_is_accepted(owner_a):
    settings: dict[str, Any] = {"tools": {"exec": {}}}
    inner: dict[str, Any] = {}
    cursor = inner
    for _ in range(55):
        cursor["a"] = {}
        cursor = cursor["a"]
    body = {"key": "nested", "name": "N", "settings": {**settings, "deep": inner}}
    response = owner_a.post("/api/v1/agents/", body, format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ('{"n": 1e999}', "the number 1e999 is too large; send a finite number"),
        ('{"n": -1e999}', "the number -1e999 is too large; send a finite number"),
        ('{"n": NaN}', "NaN is not a JSON number; send a finite number"),
        ('{"n": [Infinity]}', "Infinity is not a JSON number; send a finite number"),
        ('{"n": -Infinity}', "-Infinity is not a JSON number; send a finite number"),
    ],
)
def test_non_finite_numbers_are_refused(member_a, tenant_a, args, message):
    services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    before = tenant_state(tenant_a)
    body = '{"agent": "bot", "tool": "datetime", "args": ' + args + "}"
    error = _error(
        member_a.post("/api/v1/runtime/execute", body, content_type="application/json"), 400, "malformed_json"
    )
    assert error["message"] == f"JSON parse error - {message}"
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize(
    ("settings_json", "where"),
    [
        ('{"note": "a\\u0000b"}', "settings.note"),
        ('{"deep": {"list": ["ok", "a\\u0000"]}}', "settings.deep.list.1"),
    ],
)
def test_nul_characters_in_values_are_refused_by_field(owner_a, tenant_a, settings_json, where):
    before = tenant_state(tenant_a)
    response = owner_a.patch(
        "/api/v1/tenant/", '{"settings": ' + settings_json + "}", content_type="application/json"
    )
    error = _error(response, 400, "invalid")
    assert error["details"]["settings"] == [f"Null characters are not allowed (at {where})."]
    response = owner_a.post(
        "/api/v1/agents/", '{"key": "nul", "name": "a\\u0000"}', content_type="application/json"
    )
    assert "Null characters" in _error(response, 400, "invalid")["details"]["name"][0]
    assert tenant_state(tenant_a) == before


@pytest.mark.parametrize("settings_json", ['{"k\\u0000": 1}', '{"deep": [{"k\\u0000": 1}]}'])
def test_nul_characters_in_keys_are_refused(owner_a, tenant_a, settings_json):
    before = tenant_state(tenant_a)
    response = owner_a.patch(
        "/api/v1/tenant/", '{"settings": ' + settings_json + "}", content_type="application/json"
    )
    error = _error(response, 400, "malformed_json")
    assert "NUL character (\\u0000)" in error["message"]
    assert tenant_state(tenant_a) == before


def test_duplicate_keys_are_refused(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    body = '{"key": "dup", "name": "One", "settings": {"a": 1, "a": 2}}'
    error = _error(
        owner_a.post("/api/v1/agents/", body, content_type="application/json"), 400, "malformed_json"
    )
    assert error["message"] == "JSON parse error - duplicate key 'a' in an object; name each key once"
    body = '{"key": "dup", "name": "One", "name": "Two"}'
    _error(owner_a.post("/api/v1/agents/", body, content_type="application/json"), 400, "malformed_json")
    assert tenant_state(tenant_a) == before


def test_invalid_utf8_is_refused(owner_a, tenant_a):
    before = tenant_state(tenant_a)
    body = b'{"key": "bad", "name": "\xff\xfe"}'
    _error(owner_a.post("/api/v1/agents/", body, content_type="application/json"), 400, "malformed_json")
    assert tenant_state(tenant_a) == before
