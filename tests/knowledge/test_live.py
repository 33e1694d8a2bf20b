"""The knowledge graph across real processes: a bulk upsert sent to daphne (another process) arrives live
on the ``knowledge`` topic for administrators (counts, never descriptions), members may not subscribe
to it, and knowledge_graph_search in daphne finds what was written."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.knowledge.support import EXECUTE, UPSERT, ref, relation
from tests.live.conftest import daphne, sockets  # noqa: F401
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_bulk_upsert_in_daphne_is_published_to_administrators(
    tenant_a,
    live: LiveProcesses,
    daphne: str,  # noqa: F811
    sockets: contextlib.ExitStack,  # noqa: F811
):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    admin_key = factories.make_api_key(tenant_a, Role.ADMIN)
    admin = sockets.enter_context(open_socket(live.ws_url, api_key=admin_key))
    assert "knowledge" in admin.recv()["topics"]
    assert admin.subscribe(["knowledge"])["topics"] == ["knowledge"]
    member_key = factories.make_api_key(tenant_a, Role.MEMBER)
    member = sockets.enter_context(open_socket(live.ws_url, api_key=member_key))
    assert "knowledge" not in member.recv()["topics"]
    reply = member.request({"type": "subscribe", "topics": ["knowledge"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")

    payload = {
        "entities": [
            {"type": "person", "name": "Ada", "description": "a private note about Ada"},
            {"type": "organization", "name": "Acme"},
        ],
        "relations": [relation(ref("person", "Ada"), "works_at", ref("organization", "Acme"))],
    }
    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as api:
        response = api.post(UPSERT, json=payload)
        assert response.status_code == 200, response.text

    event = admin.wait_for(lambda m: event_of(m, topic="knowledge", type="knowledge.graph_upserted"))["event"]
    assert event["tenant"] == tenant_a.slug
    data = event["data"]
    assert (data["agent"], data["user_id"], data["entities_created"], data["relations_created"]) == (
        "bot",
        "",
        2,
        1,
    )
    assert "private note" not in str(event)

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {member_key}"}, timeout=60) as api:
        found = api.post(
            EXECUTE, json={"agent": "bot", "tool": "knowledge_graph_search", "args": {"query": "Ada"}}
        )
    assert found.status_code == 200, found.text
    assert "   - Ada --works_at--> Acme [organization]" in found.json()["for_llm"]
