"""The ``team:<id>`` topic on a real daphne follows the team's user grants: a session user below admin
without a grant on a restricted team is refused its topic (and sees nothing of it), a granted one gets
its events, an admin and an API key are unaffected, and unknown topics are refused as before."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from django.conf import settings
from django.test import Client

from apps.teams import board, services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def session_cookie(user) -> str:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, **kwargs: str) -> EventSocket:
    sock = sockets.enter_context(open_socket(live.ws_url, **kwargs))
    hello = sock.recv()
    assert hello["type"] == "hello", hello
    return sock


def test_a_restricted_teams_topic_refuses_a_session_user_without_a_grant(live, daphne, sockets, tenant_a):
    crew = make_crew(tenant_a)
    topic = f"team:{crew.team.pk}"
    user = factories.make_user(tenant_a, Role.MEMBER, email="nina@a.test")
    granted = factories.make_user(tenant_a, Role.VIEWER, email="gus@a.test")
    admin = factories.make_user(tenant_a, Role.ADMIN, email="ada@a.test")

    # Open while the team has no grants: the member may follow it.
    open_sock = connect(live, sockets, cookie=session_cookie(user), origin=daphne)
    assert open_sock.subscribe([topic])["topics"] == [topic]
    open_sock.request({"type": "unsubscribe", "topics": [topic]})

    services.grant_create(actor=Actor.system(tenant_a), team=crew.team, user_id="GUS@a.test", role="viewer")

    nina = connect(live, sockets, cookie=session_cookie(user), origin=daphne)
    reply = nina.request({"type": "subscribe", "topics": ["agents", topic]})
    assert (reply["type"], reply["code"]) == ("error", "not_found"), reply
    assert topic in reply["message"]
    # Nothing was subscribed, not even the allowed topic of the refused request.
    assert nina.request({"type": "unsubscribe", "topics": ["agents"]}) == {
        "type": "unsubscribed",
        "topics": [],
    }
    # A team id that does not exist is refused the same way (no hint of which teams exist).
    ghost = nina.request({"type": "subscribe", "topics": [f"team:{uuid.uuid4()}"]})
    assert (ghost["type"], ghost["code"]) == ("error", "not_found")
    # Unknown topics are still unknown.
    bad = nina.request({"type": "subscribe", "topics": ["team:42"]})
    assert (bad["type"], bad["code"]) == ("error", "unknown_topic")

    gus = connect(live, sockets, cookie=session_cookie(granted), origin=daphne)
    assert gus.subscribe([topic])["topics"] == [topic]
    ada = connect(live, sockets, cookie=session_cookie(admin), origin=daphne)
    assert ada.subscribe([topic])["topics"] == [topic]
    key = connect(live, sockets, api_key=factories.make_api_key(tenant_a, Role.VIEWER))
    assert key.subscribe([topic])["topics"] == [topic]

    task = board.create_task(crew.team, actor=crew.as_lead, subject="Restricted work")
    for sock in (gus, ada, key):
        event = sock.wait_for(lambda m: event_of(m, topic=topic, type="task.created"))["event"]
        assert event["data"]["identifier"] == task.identifier
    assert nina.request({"type": "ping"}) == {"type": "pong"}
    assert not nina.events()
