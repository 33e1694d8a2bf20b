"""The ``me`` topic of ``/ws/events/`` on a real daphne: every role may subscribe, and an event published
for one actor reaches that actor's sockets only (not another member of the tenant, not another tenant,
not the same user acting in another tenant)."""

from __future__ import annotations

import contextlib
from functools import partial

import pytest
from django.conf import settings
from django.db import transaction
from django.test import Client

from apps.accounts import services
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, **kwargs: str) -> tuple[EventSocket, dict]:
    sock = sockets.enter_context(open_socket(live.ws_url, **kwargs))
    hello = sock.recv()
    assert hello["type"] == "hello", hello
    return sock, hello


def key_of(tenant: Tenant, role: str) -> tuple[str, str]:
    """A new API key of ``tenant``: its id (the actor id) and the raw key."""
    key, raw = services.api_key_create(actor=Actor.system(tenant), name=f"me-{role}-{tenant.slug}", role=role)
    return str(key.pk), raw


def session_cookie(user) -> str:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_an_event_for_one_api_key_reaches_only_its_sockets(live, daphne, sockets, tenant_a, tenant_b):
    mine_id, mine_raw = key_of(tenant_a, Role.VIEWER)
    other_id, other_raw = key_of(tenant_a, Role.OWNER)
    foreign_id, foreign_raw = key_of(tenant_b, Role.OWNER)
    mine, hello = connect(live, sockets, api_key=mine_raw)
    assert "me" in hello["topics"]
    assert mine.subscribe(["me"])["topics"] == ["me"]
    mine_twice, _ = connect(live, sockets, api_key=mine_raw)
    mine_twice.subscribe(["me"])
    other, _ = connect(live, sockets, api_key=other_raw)
    other.subscribe(["me", "audit", "mcp"])
    foreign, _ = connect(live, sockets, api_key=foreign_raw)
    foreign.subscribe(["me"])

    events.publish_to_actor(
        tenant=tenant_a, kind="api_key", actor_id=mine_id, type="note.for_you", data={"n": 1}
    )
    # B's actor with the same kind; markers for the others, sent after the event under test.
    events.publish_to_actor(tenant=tenant_b, kind="api_key", actor_id=mine_id, type="note.for_you", data={})
    events.publish_to_actor(tenant=tenant_a, kind="api_key", actor_id=other_id, type="marker", data={})
    events.publish_to_actor(tenant=tenant_b, kind="api_key", actor_id=foreign_id, type="marker", data={})

    for sock in (mine, mine_twice):
        event = sock.wait_for(partial(event_of, topic="me", type="note.for_you", n=1))["event"]
        assert set(event) == {"id", "type", "tenant", "topic", "data", "ts"}
        assert (event["tenant"], event["data"]) == (tenant_a.slug, {"n": 1})
    other.wait_for(partial(event_of, topic="me", type="marker"))
    foreign.wait_for(partial(event_of, topic="me", type="marker"))
    assert [e["type"] for e in other.events()] == ["marker"]
    assert [e["type"] for e in foreign.events()] == ["marker"]
    assert [e["type"] for e in mine.events()] == ["note.for_you"]


def test_a_user_gets_its_own_events_in_the_tenant_it_acts_in(live, daphne, sockets, tenant_a, tenant_b):
    user = factories.make_user(tenant_a, Role.MEMBER)
    services.membership_create(actor=Actor.system(tenant_b), email=user.email, role=Role.OWNER)
    colleague = factories.make_user(tenant_a, Role.ADMIN)
    in_a, hello = connect(live, sockets, cookie=session_cookie(user), origin=daphne)
    assert hello["tenant"] == tenant_a.slug
    in_a.subscribe(["me"])
    colleague_sock, _ = connect(live, sockets, cookie=session_cookie(colleague), origin=daphne)
    colleague_sock.subscribe(["me"])

    # Published inside a transaction: nothing leaves before the commit.
    with transaction.atomic():
        events.publish_to_actor(tenant=tenant_b, kind="user", actor_id=str(user.pk), type="in.b", data={})
        events.publish_to_actor(tenant=tenant_a, kind="user", actor_id=str(user.pk), type="in.a", data={})
    events.publish_to_actor(tenant=tenant_a, kind="user", actor_id=str(colleague.pk), type="marker", data={})

    in_a.wait_for(partial(event_of, topic="me", type="in.a"))
    colleague_sock.wait_for(partial(event_of, topic="me", type="marker"))
    assert [e["type"] for e in colleague_sock.events()] == ["marker"]
    # The marker was published last, so by now the event for B would have arrived if it could.
    assert in_a.request({"type": "ping"}) == {"type": "pong"}
    assert [e["type"] for e in in_a.events()] == ["in.a"]


def test_unsubscribing_me_stops_delivery(live, daphne, sockets, tenant_a):
    mine_id, mine_raw = key_of(tenant_a, Role.MEMBER)
    sock, _ = connect(live, sockets, api_key=mine_raw)
    sock.subscribe(["me", "agents"])
    assert sock.request({"type": "unsubscribe", "topics": ["me"]})["topics"] == ["agents"]

    events.publish_to_actor(tenant=tenant_a, kind="api_key", actor_id=mine_id, type="gone", data={})
    services.agent_create(actor=Actor.system(tenant_a), key="marker", name="Marker")

    sock.wait_for(partial(event_of, topic="agents", type="agent.created", key="marker"))
    assert [e["topic"] for e in sock.events()] == ["agents"]


def test_me_cannot_be_published_to_the_whole_tenant(tenant_a):
    with pytest.raises(ValueError, match="publish_to_actor"):
        events.publish(tenant=tenant_a, topic="me", type="x", data={})
