"""The ``team:<id>`` topic on a real daphne: a team's board events reach its tenant's subscribers, and
never another tenant's, even one that names the same team id."""

from __future__ import annotations

import contextlib

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
    # B may name A's team id: the group carries B's tenant, so nothing of A's can arrive.
    spy, _ = connect(live, sockets, factories.make_api_key(tenant_b, Role.OWNER))
    spy.subscribe([topic, f"team:{theirs.team.pk}"])

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
