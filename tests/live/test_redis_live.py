"""``REDIS_URL`` end to end: daphne and a django-q2 cluster on a real ``redis-server``.

The children get ``REDIS_URL`` (channel layer ``RedisPubSubChannelLayer``, cache ``RedisCache``); this
test process keeps its PostgreSQL settings, and the q2 broker stays the ORM on the test database.
Besides what a client sees, the tests look into Redis itself (subscriptions, keys, connections), so a
child silently falling back to PostgreSQL would fail them.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
import pytest
import redis
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from apps.accounts import services
from apps.realtime.events import TOPICS, group_name
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.live.test_readyz_live import assert_all_ready, poll_readyz
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses
from tests.redis_server import RedisServer, redis_server_fixture  # noqa: F401 (the session fixture)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# channels_redis' default prefix: a group is the PUB/SUB channel "asgi__group__<group>", a channel of
# new_channel() is "asgispecific.<hex>".
LAYER_PREFIX = "asgi"
SETTLE_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def redis_live(live: LiveProcesses, redis_server: RedisServer) -> Iterator[LiveProcesses]:
    """daphne + qcluster with ``REDIS_URL``, for this module only."""
    # The session's PostgreSQL-layer processes share the test database's ORM queue and its schedule: a
    # task enqueued here could run in their cluster and publish on PostgreSQL, where our daphne never
    # sees it. Stop them; later tests restart what they need (live.daphne() / live.qcluster()).
    live.stop_all()
    processes = LiveProcesses(
        db_name=connection.settings_dict["NAME"], extra_env={"REDIS_URL": redis_server.url}, label="redis-"
    )
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture
def redis_daphne(redis_live: LiveProcesses) -> str:
    """The base URL of the Redis daphne (not the session's ``daphne`` fixture)."""
    return redis_live.daphne()


@pytest.fixture
def rcli(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client of the test Redis, to look at what the children did there."""
    with redis_server.client() as client:
        yield client


def subscribers(rcli: redis.Redis, tenant: Tenant, topic: str) -> int:
    """How many connections are subscribed to the tenant's topic group in Redis."""
    channel = f"{LAYER_PREFIX}__group__{group_name(tenant.pk, topic)}"
    return int(dict(rcli.pubsub_numsub(channel))[channel.encode()])


def publishes(rcli: redis.Redis) -> int:
    """PUBLISH commands the server has executed so far."""
    stats: dict[str, Any] = rcli.info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))


def eventually(check: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT) -> None:
    """Poll ``check`` until it holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:g}s")
        time.sleep(0.1)


def open_subscribed(
    redis_live: LiveProcesses, sockets: contextlib.ExitStack, tenant: Tenant, topics: list[str]
) -> EventSocket:
    """A socket of the tenant's owner, subscribed to ``topics`` (closed by ``sockets``)."""
    sock = sockets.enter_context(
        open_socket(redis_live.ws_url, api_key=factories.make_api_key(tenant, Role.OWNER))
    )
    hello = sock.recv()
    assert (hello["type"], hello["tenant"]) == ("hello", tenant.slug), hello
    sock.subscribe(topics)
    return sock


def api(base_url: str, raw_key: str) -> httpx.Client:
    """An HTTP client of daphne authenticated with an API key."""
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=10)


def make_expired_key(tenant: Tenant, name: str) -> ApiKey:
    """Created through the service with a future expiry, then moved into the past (tenant-scoped)."""
    key, _ = services.api_key_create(
        actor=Actor.system(tenant), name=name, expires_at=timezone.now() + timedelta(hours=1)
    )
    ApiKey.objects.for_tenant(tenant).filter(pk=key.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    return key


def is_expired_audit(message: dict, key: ApiKey) -> bool:
    """The audit event of the worker's sweep expiring ``key``."""
    return event_of(message, topic="audit", type="audit.event", verb="api_key.expired") and message["event"][
        "data"
    ]["target"] == {"type": "api_key", "id": str(key.pk)}


# --- a. the worker publishes through Redis, daphne delivers ---------------------------------------------


def test_worker_events_reach_a_daphne_socket_through_redis(redis_live, redis_daphne, sockets, rcli, tenant_a):
    redis_live.qcluster()
    sock = open_subscribed(redis_live, sockets, tenant_a, ["audit", "api_keys"])
    # daphne subscribed in Redis, not in PostgreSQL: one PUB/SUB subscriber per group.
    eventually(
        lambda: subscribers(rcli, tenant_a, "audit") == subscribers(rcli, tenant_a, "api_keys") == 1,
        "daphne did not subscribe the socket's groups in Redis",
    )
    before = {client["id"] for client in rcli.client_list()}
    published = publishes(rcli)

    for round_ in range(5):
        key = make_expired_key(tenant_a, f"expiring-{round_}")
        async_task("apps.accounts.tasks.expire_api_keys")
        sock.wait_for(partial(is_expired_audit, key=key))
        sock.wait_for(partial(event_of, topic="api_keys", type="api_key.expired", id=str(key.pk)))

    # Through Redis: every event was a PUBLISH (two per task: audit and api_keys).
    assert publishes(rcli) - published >= 10

    # Each publish ran in a fresh event loop of a worker (async_to_sync from sync code); the connection
    # it opened was closed with that loop: no connection the worker opened is left behind.
    def leftover() -> list[dict[str, Any]]:
        return [c for c in rcli.client_list() if c["id"] not in before and c["cmd"] == "publish"]

    eventually(lambda: not leftover(), f"worker publish connections still open: {leftover()}")
    assert {e["tenant"] for e in sock.events()} == {tenant_a.slug}


def test_worker_publishing_survives_redis_dropping_every_connection(
    redis_live, redis_daphne, sockets, rcli, tenant_a
):
    """A Redis failover or a client timeout: the socket stays open and later events arrive again."""
    redis_live.qcluster()
    sock = open_subscribed(redis_live, sockets, tenant_a, ["audit"])
    first = make_expired_key(tenant_a, "before-the-drop")
    async_task("apps.accounts.tasks.expire_api_keys")
    sock.wait_for(partial(is_expired_audit, key=first))

    killed = int(rcli.execute_command("CLIENT KILL TYPE pubsub")) + int(
        rcli.execute_command("CLIENT KILL TYPE normal SKIPME yes")
    )
    assert killed >= 1
    # daphne's receiver reconnects and subscribes again by itself (events in between are lost: fine).
    eventually(lambda: subscribers(rcli, tenant_a, "audit") == 1, "daphne never subscribed again")

    for round_ in range(2):
        key = make_expired_key(tenant_a, f"after-the-drop-{round_}")
        async_task("apps.accounts.tasks.expire_api_keys")
        sock.wait_for(partial(is_expired_audit, key=key))
    assert sock.request({"type": "ping"}) == {"type": "pong"}


# --- b. tenant isolation on Redis ----------------------------------------------------------------------


def test_a_tenant_never_receives_another_tenants_events_on_redis(
    redis_live, redis_daphne, sockets, rcli, tenant_a, tenant_b
):
    redis_live.qcluster()
    sock_a = open_subscribed(redis_live, sockets, tenant_a, sorted(TOPICS))
    sock_b = open_subscribed(redis_live, sockets, tenant_b, sorted(TOPICS))
    # One Redis channel per tenant and topic: B's subscription is not A's.
    eventually(
        lambda: subscribers(rcli, tenant_a, "audit") == subscribers(rcli, tenant_b, "audit") == 1,
        "daphne did not subscribe both tenants' groups in Redis",
    )

    # Published by the worker: one sweep expires a key of each tenant.
    keys: dict[str, ApiKey] = {t.slug: make_expired_key(t, "expiring") for t in (tenant_a, tenant_b)}
    async_task("apps.accounts.tasks.expire_api_keys")
    sock_a.wait_for(partial(is_expired_audit, key=keys[tenant_a.slug]))
    sock_b.wait_for(partial(is_expired_audit, key=keys[tenant_b.slug]))
    # Published by daphne itself (API requests): A's changes first, then a marker for each tenant.
    raw_a = factories.make_api_key(tenant_a, Role.ADMIN)
    raw_b = factories.make_api_key(tenant_b, Role.ADMIN)
    with api(redis_daphne, raw_a) as client_a, api(redis_daphne, raw_b) as client_b:
        for agent_key in ("alpha", "beta", "marker-a"):
            assert client_a.post("/api/v1/agents/", json={"key": agent_key, "name": "A"}).status_code == 201
        assert client_b.post("/api/v1/agents/", json={"key": "marker-b", "name": "B"}).status_code == 201
    sock_a.wait_for(partial(event_of, topic="agents", type="agent.created", key="marker-a"))
    sock_b.wait_for(partial(event_of, topic="agents", type="agent.created", key="marker-b"))

    # Each saw only its own tenant's events: none of the other's keys, agents or audit records.
    assert {e["tenant"] for e in sock_a.events()} == {tenant_a.slug}
    assert {e["tenant"] for e in sock_b.events()} == {tenant_b.slug}
    seen_by_a, seen_by_b = json.dumps(sock_a.events()), json.dumps(sock_b.events())
    for foreign in (str(keys[tenant_a.slug].pk), '"alpha"', '"beta"', '"marker-a"'):
        assert foreign not in seen_by_b
    for foreign in (str(keys[tenant_b.slug].pk), '"marker-b"'):
        assert foreign not in seen_by_a

    # Closing the sockets unsubscribes them in Redis (group_discard on disconnect).
    sockets.close()
    eventually(
        lambda: subscribers(rcli, tenant_a, "audit") == subscribers(rcli, tenant_b, "audit") == 0,
        "the closed sockets are still subscribed",
    )


# --- c, d. /readyz, and the cache really is Redis ----------------------------------------------------


def q2_stat_keys(rcli: redis.Redis) -> list[bytes]:
    """django-q2's cluster stats as Django's RedisCache stores them (``:<version>:<key>``)."""
    return sorted(rcli.scan_iter(match=f":1:{Conf.Q_STAT}*"))


def test_readyz_is_ready_on_redis_and_the_cluster_stats_live_in_redis(redis_live, redis_daphne, rcli):
    redis_live.qcluster()

    assert_all_ready(poll_readyz(redis_daphne, status=200))  # the cluster registers a few seconds after start
    # The cluster wrote its stats into Redis (the cluster list and one stat per cluster), and daphne
    # found it there: the PostgreSQL cache of the test database has no stat of this cluster.
    keys = [key.decode() for key in q2_stat_keys(rcli)]
    assert f":1:{Conf.Q_STAT}" in keys, keys
    stats = [key.removeprefix(":1:") for key in keys if key != f":1:{Conf.Q_STAT}"]
    assert stats, keys
    assert cache.get_many(stats) == {}
    for _ in range(20):
        again = httpx.get(f"{redis_daphne}/readyz", timeout=10)
        assert again.status_code == 200, again.text


def test_readyz_leaves_no_subscription_behind(redis_live, redis_daphne, rcli):
    redis_live.qcluster()
    poll_readyz(redis_daphne, status=200)

    def probe_channels() -> int:
        return len(rcli.pubsub_channels(f"{LAYER_PREFIX}*"))

    before = probe_channels()
    for _ in range(10):
        assert httpx.get(f"{redis_daphne}/readyz", timeout=10).status_code == 200
    assert probe_channels() <= before
