"""The teams API on a real daphne: task changes made through the API arrive on the team's ``team:<id>``
topic at its tenant's sockets, and never at another tenant's socket, even one naming the same team."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses
from tests.teams.conftest import make_crew

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, raw_key: str) -> EventSocket:
    sock = sockets.enter_context(open_socket(live.ws_url, api_key=raw_key))
    assert sock.recv()["type"] == "hello"
    return sock


def test_api_task_changes_reach_the_teams_subscribers_and_no_other_tenant(
    live, daphne, sockets, tenant_a, tenant_b
):
    crew = make_crew(tenant_a)
    theirs = make_crew(tenant_b, "Theirs")
    topic, their_topic = f"team:{crew.team.pk}", f"team:{theirs.team.pk}"
    watcher = connect(live, sockets, factories.make_api_key(tenant_a, Role.VIEWER))
    watcher.subscribe([topic])
    # B cannot follow A's team (refused as a 404 would be); it follows its own.
    spy = connect(live, sockets, factories.make_api_key(tenant_b, Role.OWNER))
    assert spy.request({"type": "subscribe", "topics": [topic]})["code"] == "not_found"
    spy.subscribe([their_topic])
    member = factories.make_api_key(tenant_a, Role.MEMBER)
    outsider = factories.make_api_key(tenant_b, Role.MEMBER)

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {member}"}, timeout=30) as api:
        created = api.post(f"/api/v1/teams/{crew.team.pk}/tasks/", json={"subject": "Ship the release"})
        assert created.status_code == 201, created.text
        task = created.json()
        event = watcher.wait_for(lambda m: event_of(m, topic=topic, type="task.created", id=task["id"]))[
            "event"
        ]
        assert (event["tenant"], event["data"]["identifier"], event["data"]["subject"]) == (
            tenant_a.slug,
            task["identifier"],
            "Ship the release",
        )
        assert event["data"]["event"]["actor_type"] == "human"

        url = f"/api/v1/teams/{crew.team.pk}/tasks/{task['id']}"
        assert api.post(url + "/assign", json={"agent": crew.bob.key}).status_code == 200
        assigned = watcher.wait_for(lambda m: event_of(m, topic=topic, type="task.assigned", id=task["id"]))
        assert (assigned["event"]["data"]["status"], assigned["event"]["data"]["owner"]) == (
            "in_progress",
            crew.bob.key,
        )

        blocked = api.post(url + "/comment", json={"text": "No release key", "type": "blocker"})
        assert blocked.status_code == 201, blocked.text
        failed = watcher.wait_for(lambda m: event_of(m, topic=topic, type="task.failed", id=task["id"]))
        assert failed["event"]["data"]["event"]["data"] == {"reason": "Blocked: No release key"}
        cancel = watcher.wait_for(lambda m: event_of(m, topic=topic, type="run.cancel"))
        assert cancel["event"]["data"]["agent"] == crew.bob.key
        escalation = watcher.wait_for(lambda m: event_of(m, topic=topic, type="escalation.created"))
        assert (escalation["event"]["data"]["member"], escalation["event"]["data"]["notified_lead"]) == (
            crew.bob.key,
            True,
        )

    # B acts on its own board; the marker proves B's socket was live all along
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {outsider}"}, timeout=30) as api:
        refused = api.post(f"/api/v1/teams/{crew.team.pk}/tasks/", json={"subject": "B's try"})
        assert refused.status_code == 404
        marker = api.post(f"/api/v1/teams/{theirs.team.pk}/tasks/", json={"subject": "B's marker"})
        assert marker.status_code == 201, marker.text
    spy.wait_for(lambda m: event_of(m, topic=their_topic, type="task.created", subject="B's marker"))
    assert not [e for e in spy.events() if e["topic"] == topic or e["tenant"] != tenant_b.slug]
    assert not [e for e in watcher.events() if e["tenant"] != tenant_a.slug or "B's" in str(e["data"])]
