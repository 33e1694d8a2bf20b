"""Dashboard logins and logouts are audited in the tenant the session acts in; failures are logged."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from apps.audit.models import AuditEvent
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db


def test_login_and_logout_are_audited(tenant_a):
    user = factories.make_user(tenant_a, Role.MEMBER, email="who@a.test")
    browser = Client()

    response = browser.post("/login/", {"username": "who@a.test", "password": factories.PASSWORD})
    assert response.status_code == 302
    browser.post("/logout/")

    events = list(
        AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="auth.").order_by("created_at")
    )
    assert [(e.verb, e.actor_kind, e.actor_id, e.target_id) for e in events] == [
        ("auth.login", "user", str(user.pk), str(user.pk)),
        ("auth.logout", "user", str(user.pk), str(user.pk)),
    ]
    assert events[0].data == {"email": "who@a.test"}


def test_a_failed_login_is_logged_without_the_password_and_audits_nothing(tenant_a, caplog):
    factories.make_user(tenant_a, Role.MEMBER, email="who@a.test")
    with caplog.at_level(logging.WARNING, logger="apps.dashboard.views.auth"):
        response = Client().post("/login/", {"username": "who@a.test", "password": "wrong-password-123"})
    assert response.status_code == 200
    failures = [r for r in caplog.records if r.getMessage() == "dashboard login failed"]
    assert len(failures) == 1
    assert failures[0].username == "who@a.test"  # type: ignore[attr-defined]
    assert "wrong-password-123" not in caplog.text
    assert not AuditEvent.objects.for_tenant(tenant_a).filter(verb__startswith="auth.").exists()
