"""A team's access lists (SPEC B §2.8: allow/deny user ids and channels) as the team tools enforce them:
deny beats allow, an empty allow list is open, and the teammate and system channels always pass."""

from __future__ import annotations

from typing import Any

import pytest

from apps.runtime import pipeline
from apps.teams import services
from apps.teams.access import access_refusal
from apps.teams.models import Task
from apps.tenants.actors import Actor
from apps.toolkit import gateway
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


def listing(agent, **context: Any):  # type: ignore[no-untyped-def]
    return pipeline.execute(
        actor=Actor.system(agent.tenant),
        request=gateway.CallRequest(agent=agent, tool="team_tasks", args={"action": "list"}, **context),
    ).result


@pytest.mark.parametrize(
    ("settings", "user_id", "channel", "refused"),
    [
        ({}, "u1", "telegram", None),
        ({"deny_user_ids": ["u1"]}, "u1", "telegram", "user u1 is not allowed"),
        ({"deny_user_ids": ["u1"], "allow_user_ids": ["u1"]}, "u1", "telegram", "user u1 is not allowed"),
        ({"allow_user_ids": ["u2"]}, "u1", "telegram", "user u1 is not allowed"),
        ({"allow_user_ids": ["u2"]}, "", "telegram", "user (none) is not allowed"),
        ({"allow_user_ids": ["u1"]}, "u1", "telegram", None),
        ({"deny_channels": ["telegram"]}, "u1", "telegram", "channel telegram is not allowed"),
        ({"allow_channels": ["web"]}, "u1", "telegram", "channel telegram is not allowed"),
        ({"allow_channels": ["web"]}, "u1", "web", None),
        ({"deny_user_ids": ["u1"], "deny_channels": ["system"]}, "u1", "system", None),
        ({"allow_channels": ["web"]}, "u1", "teammate", None),
    ],
)
def test_access_lists(settings, user_id, channel, refused):
    result = access_refusal(settings, user_id=user_id, channel=channel, team_name="Builders")
    if refused is None:
        assert result is None
    else:
        assert result is not None
        assert refused in result


def test_the_tools_refuse_a_denied_user_and_change_nothing(tenant_a):
    crew = make_crew(tenant_a)
    services.team_update_settings(
        actor=Actor.system(tenant_a), team=crew.team, settings={"version": 2, "deny_user_ids": ["mallory"]}
    )
    refused = listing(crew.lead, user_id="mallory", channel="telegram")
    assert refused.is_error
    assert refused.for_llm == "user mallory is not allowed to use team Builders"
    create = pipeline.execute(
        actor=Actor.system(tenant_a),
        request=gateway.CallRequest(
            agent=crew.lead,
            tool="team_tasks",
            args={"action": "create", "subject": "sneaky"},
            user_id="mallory",
            channel="telegram",
        ),
    ).result
    assert create.is_error
    assert not Task.objects.for_tenant(tenant_a).exists()
    assert not listing(crew.lead, user_id="alice", channel="telegram").is_error
    assert not listing(crew.lead, user_id="mallory", channel="teammate").is_error
