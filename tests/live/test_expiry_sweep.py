"""The API-key expiry sweep, in-process (no live servers): once per expired key, per tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from apps.accounts import services, tasks
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from apps.toolkit import schedules

pytestmark = pytest.mark.django_db


def make_expired_key(tenant: Tenant, name: str) -> ApiKey:
    """A key created through the service (future expiry), then moved into the past (tenant-scoped)."""
    key, _ = services.api_key_create(
        actor=Actor.system(tenant),
        name=name,
        role=Role.MEMBER,
        expires_at=timezone.now() + timedelta(hours=1),
    )
    past = timezone.now() - timedelta(minutes=5)
    ApiKey.objects.for_tenant(tenant).filter(pk=key.pk).update(expires_at=past)
    return key


def expired_events(client) -> list[dict]:
    response = client.get("/api/v1/audit/events/", {"verb": "api_key.expired", "page_size": 200})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def key_state(client, key: ApiKey) -> str:
    response = client.get(f"/api/v1/api-keys/{key.pk}/")
    assert response.status_code == 200, response.content
    return response.json()["state"]


def test_sweep_records_each_expired_key_once_per_tenant(tenant_a, tenant_b, admin_a, outsider):
    expired_a = [make_expired_key(tenant_a, f"old-{i}") for i in range(2)]
    revoked_a = make_expired_key(tenant_a, "revoked")
    services.api_key_revoke(actor=Actor.system(tenant_a), api_key=revoked_a)
    alive_a, _ = services.api_key_create(
        actor=Actor.system(tenant_a), name="alive", expires_at=timezone.now() + timedelta(days=1)
    )
    expired_b = make_expired_key(tenant_b, "old-b")

    assert tasks.expire_api_keys() == 3

    events_a = expired_events(admin_a)
    assert sorted(e["target"]["id"] for e in events_a) == sorted(str(k.pk) for k in expired_a)
    for event in events_a:
        assert event["actor"]["kind"] == "system"
        assert event["target"]["type"] == "api_key"
        assert event["data"]["state"] == "expired"
    events_b = expired_events(outsider)
    assert [e["target"]["id"] for e in events_b] == [str(expired_b.pk)]
    assert [key_state(admin_a, k) for k in expired_a] == ["expired", "expired"]
    assert key_state(admin_a, revoked_a) == "revoked"
    assert key_state(admin_a, alive_a) == "active"

    # A second run finds nothing left to record and writes nothing.
    assert tasks.expire_api_keys() == 0
    assert len(expired_events(admin_a)) == 2
    assert len(expired_events(outsider)) == 1


def test_sweep_leaves_other_tenants_untouched(tenant_a, tenant_b, outsider):
    make_expired_key(tenant_a, "old-a")
    live_b, _ = services.api_key_create(
        actor=Actor.system(tenant_b), name="live-b", expires_at=timezone.now() + timedelta(days=1)
    )
    before = ApiKey.objects.for_tenant(tenant_b).values_list("id", "expiry_recorded_at", "updated_at")
    before_rows = sorted(before, key=lambda row: str(row[0]))

    assert tasks.expire_api_keys() == 1

    after_rows = sorted(
        ApiKey.objects.for_tenant(tenant_b).values_list("id", "expiry_recorded_at", "updated_at"),
        key=lambda row: str(row[0]),
    )
    assert after_rows == before_rows
    assert expired_events(outsider) == []
    assert key_state(outsider, live_b) == "active"


def test_schedule_registration_is_idempotent():
    Schedule.objects.filter(name=tasks.EXPIRE_API_KEYS_SCHEDULE).delete()
    # A stale, hand-edited copy and a duplicate are both repaired.
    Schedule.objects.create(name=tasks.EXPIRE_API_KEYS_SCHEDULE, func="x.y", schedule_type=Schedule.DAILY)
    Schedule.objects.create(name=tasks.EXPIRE_API_KEYS_SCHEDULE, func="x.y", schedule_type=Schedule.DAILY)

    schedules.apply()
    schedules.apply()

    found = list(Schedule.objects.filter(name=tasks.EXPIRE_API_KEYS_SCHEDULE))
    assert len(found) == 1
    assert found[0].func == "apps.accounts.tasks.expire_api_keys"
    schedule = found[0]
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == (Schedule.MINUTES, 1, -1)


def test_schedule_follows_the_task_to_its_app():
    """A schedule registered under the task's first path (tenants) points at the task's module after the
    registry is applied; another schedule with the same function is left alone."""
    Schedule.objects.filter(name=tasks.EXPIRE_API_KEYS_SCHEDULE).delete()
    Schedule.objects.create(
        name=tasks.EXPIRE_API_KEYS_SCHEDULE, func="apps.tenants.tasks.expire_api_keys", schedule_type="I"
    )
    other = Schedule.objects.create(
        name="other", func="apps.tenants.tasks.expire_api_keys", schedule_type="I"
    )

    schedules.apply()
    schedule = Schedule.objects.get(name=tasks.EXPIRE_API_KEYS_SCHEDULE)
    assert schedule.func == "apps.accounts.tasks.expire_api_keys"
    assert schedule.func == f"{tasks.__name__}.{tasks.expire_api_keys.__name__}"
    other.refresh_from_db()
    assert other.func == "apps.tenants.tasks.expire_api_keys"


def test_every_declared_schedule_runs_a_task_that_exists():
    """Each app's recurring job names a function that imports, under a name no other job takes, and a
    freshly migrated database has each exactly once."""
    import importlib

    declared = schedules.declared()
    names = [item.name for item in declared]
    assert len(names) == len(set(names)) >= 5
    for item in declared:
        module, _, function = item.func.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function)), item
    schedules.apply()
    for item in declared:
        [row] = Schedule.objects.filter(name=item.name)
        assert (row.func, row.minutes) == (item.func, item.minutes)
