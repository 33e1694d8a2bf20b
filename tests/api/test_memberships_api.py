from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.audit.models import AuditEvent
from apps.tenants.models import Membership
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def test_add_new_user_who_can_then_log_in(owner_a, tenant_a):
    response = owner_a.post(
        "/api/v1/memberships/",
        {"email": "New.Person@A.test", "role": "admin", "password": factories.PASSWORD},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["email"] == "new.person@a.test"
    assert response.json()["role"] == "admin"
    assert "password" not in response.json()
    browser = Client()
    assert browser.login(username="new.person@a.test", password=factories.PASSWORD)
    me = browser.get("/api/v1/me/").json()
    assert me["kind"] == "user"
    assert me["tenant"]["slug"] == tenant_a.slug
    assert me["role"] == "admin"


def test_add_existing_user_of_another_tenant_without_password(owner_a, tenant_a, tenant_b):
    user = factories.make_user(tenant_b, "member", email="both@b.test")
    response = owner_a.post("/api/v1/memberships/", {"email": "both@b.test", "role": "viewer"}, format="json")
    assert response.status_code == 201
    assert response.json()["user_id"] == user.pk
    browser = Client()
    browser.force_login(user)
    me = browser.get("/api/v1/me/").json()
    assert sorted(t["slug"] for t in me["tenants"]) == sorted([tenant_a.slug, tenant_b.slug])
    chosen = browser.get("/api/v1/me/", HTTP_X_TOOLGATE_TENANT=tenant_a.slug).json()
    assert chosen["tenant"]["slug"] == tenant_a.slug
    assert chosen["role"] == "viewer"


def test_session_user_cannot_pick_a_tenant_they_do_not_belong_to(tenant_a, tenant_b):
    user = factories.make_user(tenant_b, "owner")
    browser = Client()
    browser.force_login(user)
    response = browser.get("/api/v1/me/", HTTP_X_TOOLGATE_TENANT=tenant_a.slug)
    assert response.status_code == 403
    assert (
        response.json()["error"]["message"] == f"You are not a member of an active tenant '{tenant_a.slug}'."
    )


def test_new_user_needs_a_password_and_existing_user_must_not_get_one(owner_a, tenant_a, tenant_b):
    missing = owner_a.post("/api/v1/memberships/", {"email": "nobody@a.test"}, format="json")
    assert missing.status_code == 400
    assert missing.json()["error"]["details"] == {"password": ["Required for a new user."]}
    factories.make_user(tenant_b, "member", email="exists@b.test")
    extra = owner_a.post(
        "/api/v1/memberships/", {"email": "exists@b.test", "password": factories.PASSWORD}, format="json"
    )
    assert extra.status_code == 400
    assert get_user_model().objects.get(email="exists@b.test").check_password(factories.PASSWORD)


def test_duplicate_member_is_a_conflict(owner_a, tenant_a):
    factories.make_user(tenant_a, "member", email="dup@a.test")
    response = owner_a.post("/api/v1/memberships/", {"email": "dup@a.test"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate_member"


def test_the_last_owner_cannot_be_demoted_or_removed(tenant_a):
    owner = factories.make_user(tenant_a, "owner", email="only@a.test")
    client = factories.key_client(factories.make_api_key(tenant_a, "owner"))
    membership = Membership.objects.for_tenant(tenant_a).get(user=owner)
    before = tenant_state(tenant_a)
    for response in (
        client.patch(f"/api/v1/memberships/{membership.pk}/", {"role": "admin"}, format="json"),
        client.delete(f"/api/v1/memberships/{membership.pk}/"),
    ):
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "last_owner"
    assert tenant_state(tenant_a) == before
    # with a second owner, the first may step down
    factories.make_user(tenant_a, "owner", email="second@a.test")
    assert (
        client.patch(f"/api/v1/memberships/{membership.pk}/", {"role": "admin"}, format="json").status_code
        == 200
    )
    event = AuditEvent.objects.for_tenant(tenant_a).filter(verb="membership.updated").get()
    assert event.data["previous_role"] == "owner"
    assert event.data["role"] == "admin"
