"""The rate quotas take slots a batch at a time (a second's worth) and never pass the limit, however many
processes take them (simulated by forgetting this process's slots between calls)."""

from __future__ import annotations

import pytest

from apps.runtime import quota_limits
from apps.runtime.ratelimit import window_count
from apps.tenants.models import Tenant

pytestmark = pytest.mark.django_db

NAME = "tool_calls_per_minute"


def limited(tenant: Tenant, value: int) -> Tenant:
    Tenant.objects.filter(pk=tenant.pk).update(quotas={NAME: value})
    return Tenant.objects.get(pk=tenant.pk)


def recorded(tenant: Tenant) -> int:
    return window_count(key=f"{tenant.pk}:quota:{NAME}", window=quota_limits.WINDOW_SECONDS)


def test_one_statement_takes_a_seconds_worth_of_slots_and_the_process_hands_them_out(tenant_a):
    tenant = limited(tenant_a, 600)  # 10 a second
    assert quota_limits.take_rate(tenant, NAME) is None
    assert recorded(tenant) == 10
    assert [quota_limits.take_rate(tenant, NAME) for _ in range(9)] == [None] * 9
    assert recorded(tenant) == 10  # the nine came from this process's batch
    assert quota_limits.take_rate(tenant, NAME) is None
    assert recorded(tenant) == 20


def test_the_limit_holds_when_every_call_comes_from_another_process(tenant_a):
    tenant = limited(tenant_a, 130)  # batches of 2: the last call finds room for one only
    results = []
    for _ in range(140):
        # A new process each time: what one took or was refused is not seen by the next.
        quota_limits._credits.clear()
        quota_limits._closed.clear()
        results.append(quota_limits.take_rate(tenant, NAME))
    assert results[:65] == [None] * 65  # 65 statements took 2 each
    assert all(wait is not None and 1 <= wait <= 60 for wait in results[65:])
    assert recorded(tenant) == 130


def test_a_changed_limit_drops_the_slots_taken_under_the_old_one(tenant_a):
    tenant = limited(tenant_a, 600)
    assert quota_limits.take_rate(tenant, NAME) is None  # 9 left in this process
    tenant = limited(tenant_a, 10)  # lowered: the window already holds 10
    assert quota_limits.take_rate(tenant, NAME) is not None


def test_small_limits_are_counted_one_call_at_a_time(tenant_a):
    tenant = limited(tenant_a, 100)
    assert quota_limits.batch_size(100) == 1
    assert quota_limits.take_rate(tenant, NAME) is None
    assert recorded(tenant) == 1


def test_a_refused_tenant_is_refused_in_process_until_a_slot_can_free(tenant_a):
    tenant = limited(tenant_a, 2)
    assert [quota_limits.take_rate(tenant, NAME) for _ in range(2)] == [None, None]
    first = quota_limits.take_rate(tenant, NAME)
    assert first is not None
    assert 1 <= first <= 60
    quota_limits._credits.clear()
    assert quota_limits.take_rate(tenant, NAME) is not None  # kept: no slot can free before then
    assert recorded(tenant) == 2
    raised = limited(tenant_a, 3)  # a raised limit is not held back by the refusal kept for the old one
    assert quota_limits.take_rate(raised, NAME) is None


def test_a_high_limit_takes_at_most_fifty_slots_a_statement(tenant_a):
    tenant = limited(tenant_a, 600_000)
    assert quota_limits.batch_size(600_000) == 50
    assert quota_limits.take_rate(tenant, NAME) is None
    assert recorded(tenant) == 50
