"""``/ws/events/`` end to end: a real daphne, a real django-q2 worker, the PostgreSQL channel layer.

Every test talks to the processes only through their public surface (websocket, HTTP) and bounds
every wait. Test data is created through the services in this process and committed
(``transaction=True``), so daphne and the worker see it.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from functools import partial

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from django_q.models import Task
from django_q.tasks import async_task
from websockets.exceptions import InvalidStatus

from apps.accounts import services
from apps.realtime.events import TOPICS
from apps.tenants.actors import Actor
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EVENT_TIMEOUT, EventSocket, event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

EVENT_KEYS = {"id", "type", "tenant", "topic", "data", "ts"}


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, **kwargs: str) -> tuple[EventSocket, dict]:
    sock = sockets.enter_context(open_socket(live.ws_url, **kwargs))
    hello = sock.recv()
    assert hello["type"] == "hello", hello
    return sock, hello


def api(base_url: str, raw_key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=10)


def make_expired_key(tenant: Tenant, name: str) -> ApiKey:
    """Created through the service with a future expiry, then moved into the past (tenant-scoped)."""
    key, _ = services.api_key_create(
        actor=Actor.system(tenant), name=name, expires_at=timezone.now() + timedelta(hours=1)
    )
    past = timezone.now() - timedelta(minutes=1)
    ApiKey.objects.for_tenant(tenant).filter(pk=key.pk).update(expires_at=past)
    return key


def is_expired_audit(message: dict, key: ApiKey) -> bool:
    return event_of(message, topic="audit", type="audit.event", verb="api_key.expired") and message["event"][
        "data"
    ]["target"] == {"type": "api_key", "id": str(key.pk)}


# --- a. the worker publishes, daphne delivers ---------------------------------------------------------


def test_worker_publishes_api_key_expired_to_a_daphne_subscriber(live, daphne, sockets, tenant_a):
    live.qcluster()
    sock, hello = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.ADMIN))
    assert (hello["tenant"], hello["role"]) == (tenant_a.slug, "admin")
    sock.subscribe(["audit", "api_keys"])
    key = make_expired_key(tenant_a, "expiring")

    task_id = async_task("apps.accounts.tasks.expire_api_keys")

    audit = sock.wait_for(lambda m: is_expired_audit(m, key))["event"]
    assert set(audit) == EVENT_KEYS
    assert (audit["tenant"], audit["topic"], audit["type"]) == (tenant_a.slug, "audit", "audit.event")
    assert audit["data"]["actor"]["kind"] == "system"
    assert audit["data"]["data"]["id"] == str(key.pk)
    assert audit["data"]["data"]["prefix"] == key.prefix
    assert audit["data"]["data"]["state"] == "expired"
    # The same commit also publishes on the api_keys topic: a second publish from the same worker task.
    change = sock.wait_for(lambda m: event_of(m, topic="api_keys", type="api_key.expired", id=str(key.pk)))
    assert change["event"]["tenant"] == tenant_a.slug
    assert change["event"]["data"]["state"] == "expired"

    # The worker, not this process, ran the sweep (the every-minute schedule may have run it as well).
    deadline = time.monotonic() + EVENT_TIMEOUT
    while not Task.objects.filter(id=task_id).exists():
        assert time.monotonic() < deadline, "the enqueued sweep never finished"
        time.sleep(0.2)
    assert Task.objects.get(id=task_id).success is True
    with api(daphne, factories.make_api_key(tenant_a, Role.ADMIN)) as client:
        recorded = client.get("/api/v1/audit/events/", params={"verb": "api_key.expired"}).json()["results"]
    assert [e["target"]["id"] for e in recorded] == [str(key.pk)]


def test_worker_keeps_publishing_task_after_task(live, daphne, sockets, tenant_a):
    """Several tasks in a row on the same workers: every one of their events arrives."""
    live.qcluster()
    sock, _ = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.ADMIN))
    sock.subscribe(["audit"])
    for round_ in range(4):
        key = make_expired_key(tenant_a, f"expiring-{round_}")
        async_task("apps.accounts.tasks.expire_api_keys")
        sock.wait_for(partial(is_expired_audit, key=key))


# --- b. tenant isolation --------------------------------------------------------------------------------


def test_a_tenant_never_receives_another_tenants_events(live, daphne, sockets, tenant_a, tenant_b):
    key_a = factories.make_api_key(tenant_a, Role.OWNER)
    key_b = factories.make_api_key(tenant_b, Role.OWNER)
    sock_a, hello_a = connect(live, sockets, api_key=key_a)
    sock_b, hello_b = connect(live, sockets, api_key=key_b)
    assert sorted(hello_a["topics"]) == sorted(hello_b["topics"]) == sorted(TOPICS)
    sock_a.subscribe(hello_a["topics"])
    sock_b.subscribe(hello_b["topics"])

    with api(daphne, key_a) as client_a, api(daphne, key_b) as client_b:
        for agent_key in ("alpha", "beta"):
            assert (
                client_a.post("/api/v1/agents/", json={"key": agent_key, "name": agent_key}).status_code
                == 201
            )
        assert client_b.post("/api/v1/agents/", json={"key": "marker-b", "name": "B"}).status_code == 201
        assert client_a.post("/api/v1/agents/", json={"key": "marker-a", "name": "A"}).status_code == 201

    # A sees its own changes, on both the agents and the audit topic, and then its marker.
    for agent_key in ("alpha", "beta"):
        sock_a.wait_for(partial(event_of, topic="agents", type="agent.created", key=agent_key))
    sock_a.wait_for(lambda m: event_of(m, topic="agents", type="agent.created", key="marker-a"))
    audited_a = [e["data"]["data"].get("key") for e in sock_a.events() if e["topic"] == "audit"]
    assert {"alpha", "beta"} <= set(audited_a)
    # B receives its own marker; A's events were published before it and never arrived at B.
    sock_b.wait_for(lambda m: event_of(m, topic="agents", type="agent.created", key="marker-b"))
    assert sock_b.events(), "B received nothing"
    assert {e["tenant"] for e in sock_b.events()} == {tenant_b.slug}
    assert not [e for e in sock_b.events() if e["data"].get("key") in {"alpha", "beta", "marker-a"}]
    # And the other way round: nothing of B reached A before A's own later marker.
    assert {e["tenant"] for e in sock_a.events()} == {tenant_a.slug}
    for event in sock_a.events() + sock_b.events():
        assert set(event) == EVENT_KEYS


# --- c. authentication and the subscribe protocol -------------------------------------------------------


def assert_refused(live: LiveProcesses, **kwargs: str) -> None:
    with pytest.raises(InvalidStatus) as refused, open_socket(live.ws_url, **kwargs):
        pass
    assert refused.value.response.status_code == 403


def test_handshake_without_credentials_is_refused(live, daphne):
    assert_refused(live)


def test_handshake_with_a_bad_api_key_is_refused(live, daphne, tenant_a):
    raw = factories.make_api_key(tenant_a, Role.OWNER)
    assert_refused(live, api_key="tgk_" + "x" * 40)
    assert_refused(live, api_key=raw[:-2] + ("aa" if not raw.endswith("aa") else "bb"))


def test_handshake_with_a_revoked_api_key_is_refused(live, daphne, tenant_a):
    key, raw = services.api_key_create(actor=Actor.system(tenant_a), name="soon-revoked", role=Role.ADMIN)
    services.api_key_revoke(actor=Actor.system(tenant_a), api_key=key)
    assert_refused(live, api_key=raw)


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_session_needs_our_own_origin(live, daphne, sockets, tenant_a):
    cookie = session_cookie(factories.make_user(tenant_a, Role.ADMIN))

    assert_refused(live, cookie=cookie, origin="http://evil.example")
    assert_refused(live, cookie=cookie)  # no Origin at all
    assert_refused(live, cookie="sessionid=not-a-session", origin=daphne)

    sock, hello = connect(live, sockets, cookie=cookie, origin=daphne)
    assert (hello["tenant"], hello["role"]) == (tenant_a.slug, "admin")
    assert sock.subscribe(["audit"])["topics"] == ["audit"]


def test_unknown_topic_lists_the_available_ones(live, daphne, sockets, tenant_a):
    sock, _ = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.ADMIN))

    reply = sock.request({"type": "subscribe", "topics": ["audit", "no-such-topic"]})

    assert reply["type"] == "error"
    assert reply["code"] == "unknown_topic"
    assert "no-such-topic" in reply["message"]
    assert reply["details"]["available"] == sorted(TOPICS)
    # Nothing was subscribed, not even the valid topic of the refused request.
    assert sock.request({"type": "unsubscribe", "topics": ["audit"]}) == {
        "type": "unsubscribed",
        "topics": [],
    }


def test_viewer_may_not_subscribe_to_audit(live, daphne, sockets, tenant_a):
    sock, hello = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.VIEWER))
    assert "audit" not in hello["topics"]

    reply = sock.request({"type": "subscribe", "topics": ["audit"]})

    assert (reply["type"], reply["code"]) == ("error", "permission_denied")
    assert "audit" in reply["message"]
    # Still open, and the topics a viewer may have work.
    assert sock.subscribe(["agents"])["topics"] == ["agents"]
    with api(daphne, factories.make_api_key(tenant_a, Role.ADMIN)) as client:
        assert client.post("/api/v1/agents/", json={"key": "seen", "name": "Seen"}).status_code == 201
    sock.wait_for(lambda m: event_of(m, topic="agents", type="agent.created", key="seen"))
    assert not [e for e in sock.events() if e["topic"] == "audit"]


@pytest.mark.parametrize(
    "message",
    [
        "not json",
        "{",
        b"\x00\x01binary",
        "[1, 2]",
        "{}",
        {"type": 3},
        {"type": "dance"},
        {"type": "subscribe"},
        {"type": "subscribe", "topics": "audit"},
        {"type": "subscribe", "topics": []},
        {"type": "subscribe", "topics": [1]},
    ],
    ids=lambda m: repr(m)[:30],
)
def test_malformed_messages_get_an_error_and_the_socket_stays_open(live, daphne, sockets, tenant_a, message):
    sock, _ = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.ADMIN))

    reply = sock.request(message)

    assert reply["type"] == "error"
    assert reply["code"] == "invalid"
    assert reply["message"]
    assert sock.request({"type": "ping"}) == {"type": "pong"}


def test_unsubscribe_stops_delivery_and_keeps_the_socket_open(live, daphne, sockets, tenant_a):
    raw = factories.make_api_key(tenant_a, Role.ADMIN)
    sock, _ = connect(live, sockets, api_key=raw)
    sock.subscribe(["agents", "audit"])

    assert sock.request({"type": "unsubscribe", "topics": ["agents"]}) == {
        "type": "unsubscribed",
        "topics": ["audit"],
    }
    with api(daphne, raw) as client:
        for agent_key in ("after", "marker"):
            assert client.post("/api/v1/agents/", json={"key": agent_key, "name": "x"}).status_code == 201

    # Events arrive in publish order: an agents event of "after" would have come before this one.
    sock.wait_for(
        lambda m: (
            event_of(m, topic="audit", type="audit.event", verb="agent.created")
            and m["event"]["data"]["data"]["key"] == "marker"
        )
    )
    assert sock.request({"type": "ping"}) == {"type": "pong"}
    assert not [e for e in sock.events() if e["topic"] == "agents"]
