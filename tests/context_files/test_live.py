"""Context files across real processes: a file an agent writes through daphne (another process) is what
this process's API reads, the write arrives live on daphne's ``context_files`` topic for administrators
(sizes and a digest, never the text), and members may not subscribe to it."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from apps.tenants.models import Agent
from apps.tenants.roles import Role
from tests import factories
from tests.context_files.support import EXECUTE, make_agent
from tests.live.conftest import daphne, sockets  # noqa: F401
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_tool_write_in_daphne_is_published_to_administrators(
    tenant_a,
    live: LiveProcesses,
    daphne: str,  # noqa: F811
    sockets: contextlib.ExitStack,  # noqa: F811
):
    make_agent(tenant_a, "fixed", Agent.Type.PREDEFINED)
    admin_key = factories.make_api_key(tenant_a, Role.ADMIN)
    admin = sockets.enter_context(open_socket(live.ws_url, api_key=admin_key))
    assert "context_files" in admin.recv()["topics"]
    assert admin.subscribe(["context_files"])["topics"] == ["context_files"]
    member_key = factories.make_api_key(tenant_a, Role.MEMBER)
    member = sockets.enter_context(open_socket(live.ws_url, api_key=member_key))
    assert "context_files" not in member.recv()["topics"]
    reply = member.request({"type": "subscribe", "topics": ["context_files"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {member_key}"}, timeout=60) as api:
        response = api.post(
            EXECUTE,
            json={
                "agent": "fixed",
                "tool": "write_file",
                "args": {"path": "USER.md", "content": "Ann, a private note\n"},
                "context": {"user_id": "ann"},
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["for_llm"] == "Wrote 20 bytes to USER.md as this user's own copy."

    event = admin.wait_for(lambda m: event_of(m, topic="context_files", type="context_file.saved"))["event"]
    assert event["tenant"] == tenant_a.slug
    data = event["data"]
    assert (data["agent"], data["name"], data["scope"], data["user_id"]) == (
        "fixed",
        "USER.md",
        "user",
        "ann",
    )
    assert (data["bytes"], data["via"], data["append"]) == (20, "tool", False)
    assert "private note" not in str(event)

    viewer = factories.key_client(factories.make_api_key(tenant_a, Role.VIEWER))
    copy = viewer.get("/api/v1/agents/fixed/context-files/users/ann/USER.md").json()
    assert copy["content"] == "Ann, a private note\n"
