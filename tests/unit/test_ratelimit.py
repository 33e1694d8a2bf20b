"""The tool rate limiter (apps/runtime/ratelimit.py): sliding window per tenant and session key,
refusals not counted, shared and atomic across connections; on PostgreSQL and on Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connection, connections
from django.test import override_settings

from apps.policy import services as policy_services
from apps.runtime import ratelimit
from apps.runtime.ratelimit import WINDOW_SECONDS, check_rate_limit
from apps.runtime.ratelimit_models import RateLimitWindow
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from apps.tenants.models import Tenant
from tests import factories
from tests.redis_server import RedisServer, redis_server_fixture  # noqa: F401 (the session fixture)

T0 = 1_800_000_000.0  # an arbitrary fixed "now": the tests drive the clock


def limited(tenant: Tenant, per_hour: int | None) -> Tenant:
    """Set (None: remove) the rate limit of the tenant's policy."""
    document = {} if per_hour is None else {"rate_limit_per_hour": per_hour}
    policy_services.policy_save(Actor.system(tenant), policy_services.target("tenant"), document)
    return tenant


def message(limit: int, key: str) -> str:
    return f"tool rate limit exceeded: {limit} actions/hour for key {key}"


@pytest.fixture(params=["postgres", "redis"])
def store(request: pytest.FixtureRequest, db: None) -> Iterator[str]:
    """Every behaviour test runs against both stores."""
    if request.param == "postgres":
        with override_settings(REDIS_URL=""):
            yield "postgres"
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    with server.client() as client:
        client.flushdb()
    with override_settings(REDIS_URL=server.url):
        yield "redis"


def calls(tenant: Tenant, key: str, count: int, now: float) -> list[str | None]:
    return [check_rate_limit(tenant=tenant, session_key=key, now=now) for _ in range(count)]


def test_under_the_limit_every_call_is_allowed(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 5)
    assert calls(tenant_a, "s1", 5, T0) == [None] * 5


def test_at_the_limit_the_call_is_refused_with_the_exact_message(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 3)
    assert calls(tenant_a, "s1", 3, T0) == [None, None, None]
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 1) == (
        "tool rate limit exceeded: 3 actions/hour for key s1"
    )


def test_default_limit_is_150(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 5)
    limited(tenant_a, None)
    assert calls(tenant_a, "s1", 150, T0) == [None] * 150
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0) == message(150, "s1")


def test_refusals_are_not_counted(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 3)
    # Three allowed calls spread over the window, then many refusals near its end.
    for offset in (0.0, 10.0, 20.0):
        assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + offset) is None
    refused = calls(tenant_a, "s1", 20, T0 + WINDOW_SECONDS - 1)
    assert refused == [message(3, "s1")] * 20
    # The first hit leaves the window: exactly one slot, whatever the 20 refusals did.
    later = T0 + WINDOW_SECONDS + 0.5
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=later) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=later) == message(3, "s1")
    # After a whole window past the last allowed call: exactly `limit` new calls.
    fresh = later + WINDOW_SECONDS + 1
    assert calls(tenant_a, "s1", 4, fresh) == [None, None, None, message(3, "s1")]


def test_window_slides(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 2)
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 1800) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 3599) == message(2, "s1")
    # Exactly one hour after the first call, it no longer counts (hits older than now - 1h drop out).
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 3600) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 3601) == message(2, "s1")
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 1800 + 3600) is None


def test_session_keys_have_separate_windows(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 2)
    assert calls(tenant_a, "s1", 3, T0) == [None, None, message(2, "s1")]
    assert calls(tenant_a, "s2", 3, T0) == [None, None, message(2, "s2")]


def test_tenants_with_the_same_session_key_have_separate_windows(
    store: str, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    limited(tenant_a, 2)
    limited(tenant_b, 3)
    assert calls(tenant_a, "s1", 3, T0) == [None, None, message(2, "s1")]
    # Tenant A's full window for "s1" does not touch tenant B's, which has its own limit.
    assert calls(tenant_b, "s1", 4, T0) == [None, None, None, message(3, "s1")]


def test_a_policy_limit_of_zero_disables_the_limit(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 0)
    assert calls(tenant_a, "s1", 300, T0) == [None] * 300
    # Nothing is even recorded (windows are written on a connection of their own and committed: other
    # tests' rows may be there, never this tenant's).
    assert not RateLimitWindow.objects.filter(key__startswith=f"{tenant_a.pk}:").exists()


@pytest.mark.parametrize("per_hour", [0, -1, -150])
def test_a_resolved_limit_of_zero_or_less_disables_the_limit(
    store: str, tenant_a: Tenant, per_hour: int
) -> None:
    limited(tenant_a, 1)  # the resolved limit passed by the pipeline wins over the one read here
    results = [
        check_rate_limit(tenant=tenant_a, session_key="s1", now=T0, per_hour=per_hour) for _ in range(300)
    ]
    assert results == [None] * 300
    assert not RateLimitWindow.objects.filter(key__startswith=f"{tenant_a.pk}:").exists()
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0, per_hour=2) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0, per_hour=2) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0, per_hour=2) == message(2, "s1")


def test_calls_without_a_session_key_are_not_limited(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 1)
    assert calls(tenant_a, "", 50, T0) == [None] * 50
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0) is None
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0) == message(1, "s1")


def test_a_lowered_limit_applies_to_the_existing_window(store: str, tenant_a: Tenant) -> None:
    limited(tenant_a, 10)
    assert calls(tenant_a, "s1", 5, T0) == [None] * 5
    limited(tenant_a, 3)
    assert check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + 1) == message(3, "s1")


def test_the_limit_is_the_tenant_policys(tenant_a: Tenant, tenant_b: Tenant) -> None:
    assert ratelimit.limit_for(tenant_a) == 150
    assert ratelimit.limit_for(limited(tenant_a, 7)) == 7
    assert ratelimit.limit_for(tenant_b) == 150
    assert ratelimit.limit_for(limited(tenant_a, 0)) is None
    for bad in ("many", True, "7", -1):
        with pytest.raises(ServiceError, match="rate_limit_per_hour: Must be an integer"):
            limited(tenant_a, bad)  # type: ignore[arg-type]
    assert ratelimit.limit_for(tenant_a) is None


@override_settings(REDIS_URL="")
def test_postgres_window_never_holds_more_than_limit_entries(tenant_a: Tenant) -> None:
    limited(tenant_a, 5)
    for i in range(40):
        check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + i * 600)  # one call every 10 min
    window = RateLimitWindow.objects.get(key=f"{tenant_a.pk}:s1")
    last = T0 + 39 * 600
    # Only allowed calls of the last hour remain, at most `limit` of them.
    assert 0 < len(window.hits) <= 5
    assert all(last - WINDOW_SECONDS < hit <= last for hit in window.hits)


@override_settings(REDIS_URL="")
def test_postgres_prune_deletes_only_windows_idle_for_a_whole_window(tenant_a: Tenant) -> None:
    limited(tenant_a, 5)
    check_rate_limit(tenant=tenant_a, session_key="old", now=T0)
    check_rate_limit(tenant=tenant_a, session_key="recent", now=T0 + 3000)
    assert ratelimit.prune(now=T0 + WINDOW_SECONDS + 1) >= 1  # and any idle window of another test
    mine = RateLimitWindow.objects.filter(key__startswith=f"{tenant_a.pk}:")
    assert list(mine.values_list("key", flat=True)) == [f"{tenant_a.pk}:recent"]
    # A pruned key starts again with an empty window.
    assert calls(tenant_a, "old", 6, T0 + WINDOW_SECONDS + 2)[-1] == message(5, "old")


def test_redis_window_expires_and_stays_bounded(tenant_a: Tenant, redis_server: RedisServer) -> None:
    limited(tenant_a, 5)
    with redis_server.client() as client:
        client.flushdb()
        with override_settings(REDIS_URL=redis_server.url):
            for i in range(40):
                check_rate_limit(tenant=tenant_a, session_key="s1", now=T0 + i * 600)
        key = f"toolgate:ratelimit:{tenant_a.pk}:s1"
        assert 0 < client.zcard(key) <= 5
        last = T0 + 39 * 600
        assert all(
            last - WINDOW_SECONDS < score <= last for _, score in client.zrange(key, 0, -1, withscores=True)
        )
        assert 0 < client.ttl(key) <= WINDOW_SECONDS + 1


# --- Concurrency: several database connections (as several processes have) on one key -----------------

THREADS = 8
CALLS_PER_THREAD = 25
LIMIT = 60


def hammer(tenant: Tenant, key: str) -> list[str | None]:
    """THREADS threads, each with its own connection, all released at once on one key."""
    results: list[str | None] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker() -> None:
        try:
            start.wait()
            mine = [check_rate_limit(tenant=tenant, session_key=key, now=T0) for _ in range(CALLS_PER_THREAD)]
            with lock:
                results.extend(mine)
        finally:
            connections.close_all()  # this thread's connection

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return results


@pytest.mark.django_db(transaction=True)
@override_settings(REDIS_URL="")
def test_postgres_concurrent_calls_on_one_key_allow_exactly_the_limit() -> None:
    tenant = limited(factories.make_tenant("race-pg"), LIMIT)
    results = hammer(tenant, "shared")
    assert len(results) == THREADS * CALLS_PER_THREAD
    assert results.count(None) == LIMIT
    assert results.count(message(LIMIT, "shared")) == THREADS * CALLS_PER_THREAD - LIMIT
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT cardinality(hits) FROM runtime_ratelimitwindow WHERE key = %s", [f"{tenant.pk}:shared"]
        )
        assert cursor.fetchone() == (LIMIT,)


@pytest.mark.django_db(transaction=True)
def test_redis_concurrent_calls_on_one_key_allow_exactly_the_limit(redis_server: RedisServer) -> None:
    tenant = limited(factories.make_tenant("race-redis"), LIMIT)
    with redis_server.client() as client:
        client.flushdb()
    with override_settings(REDIS_URL=redis_server.url):
        results = hammer(tenant, "shared")
    assert results.count(None) == LIMIT
    assert results.count(message(LIMIT, "shared")) == THREADS * CALLS_PER_THREAD - LIMIT
