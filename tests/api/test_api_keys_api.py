from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.tenants.models import ApiKey
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def test_create_shows_the_secret_once_and_stores_only_a_digest(owner_a, tenant_a):
    response = owner_a.post("/api/v1/api-keys/", {"name": "deploy bot", "role": "member"}, format="json")
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    raw = body["key"]
    assert raw.startswith(f"tgk_{body['prefix']}_")
    stored = ApiKey.objects.for_tenant(tenant_a).get(pk=body["id"])
    assert raw not in str(ApiKey.objects.for_tenant(tenant_a).filter(pk=stored.pk).values().get())
    # never again: not in the list, not in the detail, not in the audit log
    assert raw not in owner_a.get("/api/v1/api-keys/").content.decode()
    assert raw not in owner_a.get(f"/api/v1/api-keys/{body['id']}/").content.decode()
    assert raw not in str(list(AuditEvent.objects.for_tenant(tenant_a).values("data")))
    # and it works
    me = factories.key_client(raw).get("/api/v1/me/").json()
    assert me["kind"] == "api_key"
    assert me["role"] == "member"
    assert me["api_key"]["prefix"] == body["prefix"]


def test_revoke_is_audited_and_takes_effect_at_once(owner_a, tenant_a):
    created = owner_a.post("/api/v1/api-keys/", {"name": "temp", "role": "viewer"}, format="json").json()
    client = factories.key_client(created["key"])
    assert client.get("/api/v1/me/").status_code == 200

    revoked = owner_a.delete(f"/api/v1/api-keys/{created['id']}/")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    assert client.get("/api/v1/me/").status_code == 401
    assert (
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(verb="api_key.revoked", target_id=created["id"])
        .count()
        == 1
    )

    again = owner_a.delete(f"/api/v1/api-keys/{created['id']}/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_revoked"


def test_active_names_are_unique_case_insensitively_but_revoked_names_free_up(owner_a, tenant_a):
    first = owner_a.post("/api/v1/api-keys/", {"name": "Runner"}, format="json").json()
    before = tenant_state(tenant_a)
    clash = owner_a.post("/api/v1/api-keys/", {"name": "runner"}, format="json")
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "duplicate_api_key_name"
    assert tenant_state(tenant_a) == before
    owner_a.delete(f"/api/v1/api-keys/{first['id']}/")
    assert owner_a.post("/api/v1/api-keys/", {"name": "runner"}, format="json").status_code == 201


def test_expiry_must_be_in_the_future_and_is_enforced(owner_a, tenant_a):
    past = (timezone.now() - dt.timedelta(minutes=1)).isoformat()
    response = owner_a.post("/api/v1/api-keys/", {"name": "old", "expires_at": past}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"expires_at": ["Must be in the future."]}

    soon = (timezone.now() + dt.timedelta(hours=1)).isoformat()
    created = owner_a.post("/api/v1/api-keys/", {"name": "soon", "expires_at": soon}, format="json").json()
    assert factories.key_client(created["key"]).get("/api/v1/me/").status_code == 200
    ApiKey.objects.for_tenant(tenant_a).filter(pk=created["id"]).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert factories.key_client(created["key"]).get("/api/v1/me/").status_code == 401
    assert owner_a.get(f"/api/v1/api-keys/{created['id']}/").json()["state"] == "expired"


def test_list_query_count_is_bounded(owner_a, tenant_a, django_assert_max_num_queries):
    for i in range(30):
        factories.make_api_key(tenant_a, "viewer", name=f"k{i}")
    with django_assert_max_num_queries(4):
        response = owner_a.get("/api/v1/api-keys/")
    assert response.json()["count"] == 31


def test_malformed_id_is_404(owner_a):
    response = owner_a.get("/api/v1/api-keys/not-a-uuid/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
