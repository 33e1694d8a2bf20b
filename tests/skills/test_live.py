"""Skills across real processes: a skill added through daphne (another process) and its uses by an agent
loop there arrive live on daphne's ``skills`` topic for administrators (never the SKILL.md text), and
members may not subscribe to it."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from apps.accounts import services as tenant_services
from apps.skills.models import SkillUse
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.live.conftest import daphne, sockets  # noqa: F401
from tests.live.wsclient import event_of, open_socket
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

SKILL_MD = "---\nname: deploy\ndescription: Deploy the app.\ntriggers: [ship it]\n---\nThe secret steps.\n"


def test_skill_changes_and_uses_in_daphne_are_published_to_administrators(
    tenant_a,
    live: LiveProcesses,
    daphne: str,  # noqa: F811
    sockets: contextlib.ExitStack,  # noqa: F811
):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    admin_key = factories.make_api_key(tenant_a, Role.ADMIN)
    admin = sockets.enter_context(open_socket(live.ws_url, api_key=admin_key))
    assert "skills" in admin.recv()["topics"]
    assert admin.subscribe(["skills"])["topics"] == ["skills"]
    member_key = factories.make_api_key(tenant_a, Role.MEMBER)
    member = sockets.enter_context(open_socket(live.ws_url, api_key=member_key))
    assert "skills" not in member.recv()["topics"]
    reply = member.request({"type": "subscribe", "topics": ["skills"]})
    assert (reply["type"], reply["code"]) == ("error", "permission_denied")

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as api:
        created = api.post("/api/v1/skills/", json={"content": SKILL_MD, "agent": "bot"})
    assert created.status_code == 201, created.text
    event = admin.wait_for(lambda m: event_of(m, topic="skills", type="skill.created"))["event"]
    assert (event["data"]["name"], event["data"]["agent"], event["data"]["triggers"]) == (
        "deploy",
        "bot",
        ["ship it"],
    )
    assert "secret steps" not in str(event)

    with httpx.Client(base_url=daphne, headers={"Authorization": f"Bearer {member_key}"}, timeout=60) as api:
        used = api.post(
            "/api/v1/runtime/execute",
            json={
                "agent": "bot",
                "tool": "use_skill",
                "args": {"name": "deploy"},
                "context": {"session_key": "s1"},
            },
        )
        assert used.json()["is_error"] is False, used.text
        turn = api.post(
            "/api/v1/agents/bot/skills/context",
            json={"session_key": "s2", "turn": 0, "message": "ship it now"},
        )
    assert turn.status_code == 200, turn.text
    assert [row["content"] for row in turn.json()["active"]] == ["The secret steps.\n"]

    manual = admin.wait_for(lambda m: event_of(m, topic="skills", type="skill.used", how="manual"))["event"]
    assert (manual["data"]["name"], manual["data"]["session_key"]) == ("deploy", "s1")
    auto = admin.wait_for(lambda m: event_of(m, topic="skills", type="skill.used", how="auto"))["event"]
    assert auto["data"]["session_key"] == "s2"
    assert sorted(SkillUse.objects.for_tenant(tenant_a).values_list("how", flat=True)) == ["auto", "manual"]
