"""The tenant's quota page (everyone in the tenant) and the platform page (staff only: suspend, resume,
quotas), through the dashboard."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.accounts import services as accounts
from apps.tenants.actors import Actor
from apps.tenants.models import PlatformEvent, Tenant
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def staff() -> Client:
    return logged_in(
        get_user_model().objects.create_user("ops", "ops@platform.test", factories.PASSWORD, is_staff=True)
    )


def test_every_role_sees_the_tenants_quotas_and_usage(tenant_a):
    accounts.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    Tenant.objects.filter(pk=tenant_a.pk).update(quotas={"agents": 1})
    page = logged_in(factories.make_user(tenant_a, Role.VIEWER)).get("/quota/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-quota="agents" class="quota-full"' in text
    assert "set for this tenant" in text
    assert "reached" in text
    assert 'data-quota="tool_calls_per_minute" class="quota-ok"' in text
    assert 'href="/quota/"' in text  # in the navigation


def test_the_platform_page_is_for_staff_only(tenant_a):
    owner = logged_in(factories.make_user(tenant_a, Role.OWNER))
    for url in (
        "/platform/tenants/",
        "/platform/tenants/tenant-a/suspend/",
        "/platform/tenants/tenant-a/quota/",
    ):
        assert owner.get(url).status_code == 404
    assert owner.post("/platform/tenants/tenant-a/suspend/", {"reason": "x"}).status_code == 404
    anonymous = Client().get("/platform/tenants/")
    assert anonymous.status_code == 302
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"


def test_staff_suspend_with_a_reason_then_resume(staff, tenant_a, tenant_b):
    listing = staff.get("/platform/tenants/").content.decode()
    assert 'data-slug="tenant-a"' in listing
    assert 'data-slug="tenant-b"' in listing
    form = staff.get("/platform/tenants/tenant-a/suspend/")
    assert form.status_code == 200
    assert "Nothing is deleted" in form.content.decode()
    missing = staff.post("/platform/tenants/tenant-a/suspend/", {"reason": ""})
    assert missing.status_code == 200  # the form again, with the error
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    done = staff.post("/platform/tenants/tenant-a/suspend/", {"reason": "billing"}, follow=True)
    assert "Suspended tenant-a" in done.content.decode()
    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.status, tenant.suspended_reason) == ("suspended", "billing")
    assert Tenant.objects.get(pk=tenant_b.pk).status == "active"
    assert PlatformEvent.objects.get(verb="tenant.suspended").actor == "staff:ops@platform.test"
    assert staff.get("/platform/tenants/tenant-a/resume/").status_code == 200  # the confirmation
    staff.post("/platform/tenants/tenant-a/resume/")
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    assert staff.get("/platform/tenants/nope/suspend/").status_code == 404


def test_staff_set_quotas_and_empty_means_the_default(staff, tenant_a):
    page = staff.get("/platform/tenants/tenant-a/quota/")
    assert page.status_code == 200
    bad = staff.post("/platform/tenants/tenant-a/quota/", {"agents": "-3"})
    assert bad.status_code == 200
    assert Tenant.objects.get(pk=tenant_a.pk).quotas == {}
    staff.post("/platform/tenants/tenant-a/quota/", {"agents": "7", "concurrent_runs": "0"})
    assert Tenant.objects.get(pk=tenant_a.pk).quotas == {"agents": 7, "concurrent_runs": 0}
    staff.post("/platform/tenants/tenant-a/quota/", {"agents": "7"})
    assert Tenant.objects.get(pk=tenant_a.pk).quotas == {"agents": 7}
