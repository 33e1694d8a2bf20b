"""The ``policy`` and ``approvals`` topics of ``/ws/events/`` on a real daphne: role-gated and never
crossing tenants."""

from __future__ import annotations

import contextlib

import pytest

from apps.policy import services as policy
from apps.policy.models import Scope
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.wsclient import EventSocket, event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def connect(live: LiveProcesses, sockets: contextlib.ExitStack, raw_key: str) -> tuple[EventSocket, dict]:
    sock = sockets.enter_context(open_socket(live.ws_url, api_key=raw_key))
    hello = sock.recv()
    assert hello["type"] == "hello", hello
    return sock, hello


def save(tenant, document):  # type: ignore[no-untyped-def]
    return policy.policy_save(Actor.system(tenant), policy.target(Scope.TENANT), document)


def test_policy_events_reach_their_tenant_only(live, daphne, sockets, tenant_a, tenant_b):
    sock_a, hello_a = connect(live, sockets, factories.make_api_key(tenant_a, Role.VIEWER))
    sock_b, hello_b = connect(live, sockets, factories.make_api_key(tenant_b, Role.OWNER))
    assert "policy" in hello_a["topics"]
    assert {"policy", "approvals"} <= set(hello_b["topics"])
    sock_a.subscribe(["policy"])
    sock_b.subscribe(["policy", "approvals", "audit"])

    save(tenant_a, {"deny": ["exec"]})
    save(tenant_b, {"deny": ["web_fetch"]})  # B's marker, published after A's change

    event_a = sock_a.wait_for(lambda m: event_of(m, topic="policy", type="policy.updated"))["event"]
    assert event_a["tenant"] == tenant_a.slug
    assert event_a["data"]["scope"] == "tenant"
    assert event_a["data"]["changes"] == {"deny": {"added": ["exec"], "removed": []}}
    marker = sock_b.wait_for(lambda m: event_of(m, topic="policy", type="policy.updated"))["event"]
    assert marker["data"]["changes"] == {"deny": {"added": ["web_fetch"], "removed": []}}
    assert {e["tenant"] for e in sock_b.events()} == {tenant_b.slug}
    assert not [e for e in sock_b.events() if "exec" in str(e["data"])]


def test_approvals_are_for_admins_and_policy_for_everyone(live, daphne, sockets, tenant_a):
    member, hello = connect(live, sockets, factories.make_api_key(tenant_a, Role.MEMBER))
    assert "approvals" not in hello["topics"]
    reply = member.request({"type": "subscribe", "topics": ["approvals"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")
    viewer, hello = connect(live, sockets, factories.make_api_key(tenant_a, Role.VIEWER))
    assert viewer.subscribe(["policy"])["topics"] == ["policy"]
    admin, hello = connect(live, sockets, factories.make_api_key(tenant_a, Role.ADMIN))
    assert admin.subscribe(["approvals"])["topics"] == ["approvals"]
