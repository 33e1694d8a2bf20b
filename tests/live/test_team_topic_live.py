"""The ``team:<id>`` topic on a real daphne: a team's board events reach its tenant's subscribers, and
never another tenant's; another tenant's team id, or one that names no team, is refused like a 404."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from apps.teams import board
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, raw_key: str) -> tuple[EventSocket, dict]:
    sock = sockets.enter_context(open_socket(live.ws_url, api_key=raw_key))
    hello = sock.recv()
    assert hello["type"] == "hello", hello
    return sock, hello


def test_board_events_reach_the_teams_tenant_only(live, daphne, sockets, tenant_a, tenant_b):
    crew = make_crew(tenant_a)
    theirs = make_crew(tenant_b, "Theirs")
    topic = f"team:{crew.team.pk}"
    mine, hello = connect(live, sockets, factories.make_api_key(tenant_a, Role.VIEWER))
    assert hello["topic_patterns"] == ["team:<id>"]
    assert mine.subscribe([topic])["topics"] == [topic]
    # B cannot subscribe to A's team (refused as a 404 would be); it follows its own team.
    spy, _ = connect(live, sockets, factories.make_api_key(tenant_b, Role.OWNER))
    assert spy.request({"type": "subscribe", "topics": [topic]})["code"] == "not_found"
    spy.subscribe([f"team:{theirs.team.pk}"])

    task = board.create_task(crew.team, actor=crew.as_lead, subject="Ship the release")
    board.create_task(theirs.team, actor=theirs.as_lead, subject="B's marker")

    event = mine.wait_for(lambda m: event_of(m, topic=topic, type="task.created"))["event"]
    assert (event["tenant"], event["data"]["identifier"], event["data"]["subject"]) == (
        tenant_a.slug,
        task.identifier,
        "Ship the release",
    )
    marker = spy.wait_for(lambda m: event_of(m, topic=f"team:{theirs.team.pk}", type="task.created"))
    assert marker["event"]["data"]["subject"] == "B's marker"
    assert not [e for e in spy.events() if e["topic"] == topic or e["tenant"] != tenant_b.slug]


def test_team_topics_must_name_a_canonical_uuid(live, daphne, sockets, tenant_a):
    sock, _ = connect(live, sockets, factories.make_api_key(tenant_a, Role.VIEWER))
    for bad in ("team:", "team:42", "team:ABCDEF00-0000-0000-0000-000000000000", "teams:x"):
        reply = sock.request({"type": "subscribe", "topics": [bad]})
        assert (reply["type"], reply["code"]) == ("error", "unknown_topic"), bad
        assert "team:<id>" in reply["message"]


def test_another_tenants_team_topic_is_refused_like_a_404(live, daphne, sockets, tenant_a, tenant_b):
    theirs = make_crew(tenant_b, "Theirs")
    mine = make_crew(tenant_a)
    sock, _ = connect(live, sockets, factories.make_api_key(tenant_a, Role.OWNER))
    other, ghost = f"team:{theirs.team.pk}", f"team:{uuid.uuid4()}"
    replies = [sock.request({"type": "subscribe", "topics": [t]}) for t in (other, ghost)]
    # The same answer for another tenant's team and for no team at all: nothing tells them apart.
    for reply, topic in zip(replies, (other, ghost), strict=True):
        assert (reply["type"], reply["code"]) == ("error", "not_found"), reply
        assert topic in reply["message"]
    assert replies[0]["message"].replace(other, "X") == replies[1]["message"].replace(ghost, "X")
    # A refused request subscribes nothing, not even its allowed topics.
    own = f"team:{mine.team.pk}"
    mixed = sock.request({"type": "subscribe", "topics": ["agents", own, other]})
    assert (mixed["type"], mixed["code"]) == ("error", "not_found")
    assert sock.request({"type": "unsubscribe", "topics": ["agents", own]}) == {
        "type": "unsubscribed",
        "topics": [],
    }
    assert sock.subscribe([own])["topics"] == [own]
    # Nothing of B's team reaches A's socket.
    board.create_task(theirs.team, actor=theirs.as_lead, subject="B's work")
    board.create_task(mine.team, actor=mine.as_lead, subject="A's work")
    sock.wait_for(lambda m: event_of(m, topic=own, type="task.created"))
    assert not [e for e in sock.events() if e["topic"] == other or e["tenant"] != tenant_a.slug]
