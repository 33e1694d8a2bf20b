"""Approval expiry through the API: an approval past its expiry leaves the pending list at once (before any
process marks it), is never decided (409 ``approval_expired``, and deciding it times it out for good), and
the expiry follows the database's clock, so this host's clock stepping neither hastens nor delays it."""

from __future__ import annotations

import datetime as dt
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts import services
from apps.audit.models import AuditEvent
from apps.policy import tasks
from apps.policy.approval_models import PendingApproval
from apps.tenants.actors import Actor
from tests.api.tenant_state import tenant_state
from tests.policy.test_approvals_api import ask_later, decide, on_miss

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def decision_window(settings):
    settings.TOOLGATE_APPROVAL_TIMEOUT_SECONDS = 30


@pytest.fixture
def agent(tenant_a):
    return services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")


def expire_in_database(tenant, approval_id) -> None:
    """Move the approval's expiry into the past, as if its time ran out while no process watched it."""
    past = timezone.now() - timedelta(seconds=1)
    assert PendingApproval.objects.for_tenant(tenant).filter(pk=approval_id).update(expires_at=past) == 1


def stored_status(tenant, approval_id) -> str:
    return PendingApproval.objects.for_tenant(tenant).get(pk=approval_id).status


def test_an_expired_approval_leaves_the_pending_list_before_any_process_marks_it(
    member_a, admin_a, agent, tenant_a
):
    on_miss(tenant_a)
    stale = ask_later(member_a, "touch stale")["approval_id"]
    fresh = ask_later(member_a, "touch fresh")["approval_id"]
    expire_in_database(tenant_a, stale)

    listed = admin_a.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [row["id"] for row in listed] == [fresh]
    timed_out = admin_a.get("/api/v1/approvals/?status=timed_out").json()["results"]
    assert [row["id"] for row in timed_out] == [stale]
    assert admin_a.get(f"/api/v1/approvals/{stale}/").json()["status"] == "timed_out"
    # Reading changes nothing: the row is marked by a write (a timer, the sweep, a decision).
    assert stored_status(tenant_a, stale) == "pending"


def test_deciding_an_expired_approval_is_409_approval_expired_and_times_it_out(
    member_a, admin_a, agent, tenant_a
):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch too-late")
    expire_in_database(tenant_a, asked["approval_id"])

    body = decide(admin_a, asked["approval_id"], "allow-once", status=409)
    assert body["error"]["code"] == "approval_expired"
    message = body["error"]["message"]
    assert "expired at" in message
    assert "its call was refused and nothing ran" in message
    # The refusal committed the time-out: the call is refused, the inbox is told, nothing was allowed.
    assert stored_status(tenant_a, asked["approval_id"]) == "timed_out"
    verbs = list(
        AuditEvent.objects.for_tenant(tenant_a)
        .filter(target_id=asked["approval_id"])
        .values_list("verb", flat=True)
    )
    assert "approval.timed_out" in verbs
    assert "approval.decided" not in verbs
    # Asking again says the same, and changes nothing more.
    before = tenant_state(tenant_a)
    again = decide(admin_a, asked["approval_id"], "deny", status=409)
    assert again["error"]["code"] == "approval_expired"
    assert tenant_state(tenant_a) == before


def test_deciding_a_decided_approval_says_how_it_was_resolved(member_a, admin_a, agent, tenant_a):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch twice")
    decide(admin_a, asked["approval_id"], "deny", "no")
    body = decide(admin_a, asked["approval_id"], "allow-once", status=409)
    assert body["error"]["code"] == "conflict"
    assert "it was denied by" in body["error"]["message"]


def jump_clock(monkeypatch, offset: timedelta) -> None:
    """Step this process's clock by ``offset`` (as NTP or an operator would), the database's unchanged."""
    real = timezone.now

    def stepped() -> dt.datetime:
        return real() + offset

    monkeypatch.setattr(timezone, "now", stepped)


def test_a_clock_stepping_forward_does_not_expire_approvals_early(
    member_a, admin_a, agent, tenant_a, monkeypatch
):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch after-the-jump")
    jump_clock(monkeypatch, timedelta(hours=3))

    assert tasks.expire_approvals() == 0
    listed = admin_a.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [row["id"] for row in listed] == [asked["approval_id"]]
    decided = decide(admin_a, asked["approval_id"], "allow-once")
    assert decided["status"] == "allowed"


def test_a_clock_stepping_back_does_not_keep_approvals_alive(member_a, admin_a, agent, tenant_a, monkeypatch):
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch before-the-jump")
    expire_in_database(tenant_a, asked["approval_id"])
    jump_clock(monkeypatch, timedelta(hours=-3))

    assert admin_a.get("/api/v1/approvals/?status=pending").json()["results"] == []
    assert tasks.expire_approvals() == 1
    assert stored_status(tenant_a, asked["approval_id"]) == "timed_out"
    assert (
        decide(admin_a, asked["approval_id"], "allow-once", status=409)["error"]["code"] == "approval_expired"
    )


def test_a_new_approval_expires_by_the_database_clock(member_a, admin_a, agent, tenant_a, monkeypatch):
    jump_clock(monkeypatch, timedelta(hours=5))
    on_miss(tenant_a)
    asked = ask_later(member_a, "touch stamped")
    expires = dt.datetime.fromisoformat(
        admin_a.get(f"/api/v1/approvals/{asked['approval_id']}/").json()["expires_at"]
    )
    real_now = dt.datetime.now(dt.UTC)
    assert timedelta(seconds=25) < expires - real_now <= timedelta(seconds=31)
