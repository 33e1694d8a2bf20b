"""Suspending and resuming a tenant with the management commands: the refusals its keys and members get,
what is recorded, schedules skipped, and nothing of another tenant touched. The same on real processes
(websockets, a waiting run, an MCP server process) is in tests/live/test_tenant_suspension_live.py."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.accounts import services as accounts
from apps.audit.models import AuditEvent
from apps.runs import cron
from apps.runs.models import CronFiring
from apps.tenants.actors import Actor
from apps.tenants.models import PlatformEvent, Tenant
from apps.tenants.roles import Role
from tests import factories

pytestmark = pytest.mark.django_db


def suspend(slug: str, *extra: str) -> str:
    out = StringIO()
    call_command("suspend_tenant", slug, *extra, stdout=out, stderr=StringIO())
    return out.getvalue()


def resume(slug: str) -> str:
    out = StringIO()
    call_command("resume_tenant", slug, stdout=out)
    return out.getvalue()


def test_a_suspended_tenants_keys_get_403_with_the_reason_and_resume_undoes_it(tenant_a, tenant_b):
    key_a = factories.key_client(factories.make_api_key(tenant_a, Role.OWNER))
    key_b = factories.key_client(factories.make_api_key(tenant_b, Role.OWNER))
    assert "Suspended tenant-a" in suspend("tenant-a", "--reason", "invoice overdue")

    refused = key_a.get("/api/v1/me/")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "tenant_suspended"
    assert "invoice overdue" in refused.json()["error"]["message"]
    assert key_a.post("/api/v1/agents/", {"key": "late", "name": "Late"}, format="json").status_code == 403
    assert key_b.get("/api/v1/me/").status_code == 200

    assert "Resumed tenant-a" in resume("tenant-a")
    assert key_a.get("/api/v1/me/").status_code == 200
    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.status, tenant.suspended_reason, tenant.suspended_at) == ("active", "", None)


def test_a_suspended_tenants_members_see_why_on_the_dashboard_and_the_api(tenant_a, tenant_b):
    owner = factories.make_user(tenant_a, Role.OWNER)
    browser = Client()
    browser.force_login(owner)
    assert browser.get("/").status_code == 200
    suspend("tenant-a", "--reason", "security review")

    page = browser.get("/")
    assert page.status_code == 403
    text = page.content.decode()
    assert "Your tenant is suspended" in text
    assert "security review" in text
    api = browser.get("/api/v1/me/")
    assert api.status_code == 403
    assert api.json()["error"]["code"] == "tenant_suspended"

    resume("tenant-a")
    assert browser.get("/").status_code == 200


def test_a_member_of_two_tenants_keeps_working_in_the_active_one(tenant_a, tenant_b):
    user = factories.make_user(tenant_a, Role.ADMIN, email="both@x.test")
    accounts.membership_create(actor=Actor.system(tenant_b), email="both@x.test", role=Role.VIEWER)
    suspend("tenant-a")
    browser = Client()
    browser.force_login(user)
    me = browser.get("/api/v1/me/")
    assert me.status_code == 200
    assert me.json()["tenant"]["slug"] == "tenant-b"


def test_suspension_and_resumption_are_recorded_for_the_platform_and_the_tenant(tenant_a, tenant_b):
    suspend("tenant-a", "--reason", "abuse report 42")
    resume("tenant-a")
    events = list(PlatformEvent.objects.order_by("created_at").values_list("verb", "tenant_slug", "data"))
    assert events == [
        ("tenant.suspended", "tenant-a", {"reason": "abuse report 42"}),
        ("tenant.resumed", "tenant-a", {}),
    ]
    assert all(e.actor.startswith("command:") for e in PlatformEvent.objects.all())
    verbs = list(
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(verb__startswith="tenant.")
        .order_by("created_at")
        .values_list("verb", flat=True)
    )
    assert verbs[-2:] == ["tenant.suspended", "tenant.resumed"]
    assert (
        not AuditEvent.objects.for_tenant(tenant_b)
        .filter(verb__in=["tenant.suspended", "tenant.resumed"])
        .exists()
    )


def test_a_suspended_tenants_scheduled_jobs_are_skipped(tenant_a):
    system = Actor.system(tenant_a)
    agent = accounts.agent_create(actor=system, key="bot", name="Bot")
    job = cron.job_create(actor=system, agent=agent, name="nightly", schedule="0 3 * * *", message="Report.")
    suspend("tenant-a")
    firing = cron.fire(str(tenant_a.pk), str(job.pk))
    assert firing is not None
    assert (firing.status, firing.detail) == (CronFiring.Status.SKIPPED, "the tenant is suspended")
    assert not CronFiring.objects.for_tenant(tenant_a).exclude(status=CronFiring.Status.SKIPPED).exists()


def test_the_commands_refuse_clearly_and_change_nothing(tenant_a):
    with pytest.raises(CommandError, match="No tenant with slug 'nope'"):
        suspend("nope")
    with pytest.raises(CommandError, match="is not suspended"):
        resume("tenant-a")
    with pytest.raises(CommandError, match="at most 500 characters"):
        suspend("tenant-a", "--reason", "x" * 501)
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    suspend("tenant-a")
    with pytest.raises(CommandError, match="already suspended"):
        suspend("tenant-a")
    assert PlatformEvent.objects.count() == 1
