"""The team access lists (allow/deny user ids and channels) on the dashboard's team settings page: shown,
saved through the team settings service (audited), bounded, and then enforced by the team tools and shown
by the REST API. Only admins reach the page; another tenant's team is a 404 with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.runtime import pipeline
from apps.teams.models import Team
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from apps.toolkit import gateway
from tests import factories
from tests.api.tenant_state import tenant_state
from tests.dashboard.personas import login
from tests.teams.conftest import Crew, make_crew

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(tenant_a: Tenant) -> Crew:
    return make_crew(tenant_a)


def settings_url(crew: Crew) -> str:
    return reverse("dashboard:team_settings", args=[crew.team.pk])


def form(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "Builders",
        "description": "",
        "blocker_escalation": "on",
        "followup_interval_minutes": "30",
        "followup_max_reminders": "0",
        "escalation_mode": "",
        "notification_mode": "direct",
        "notify": ["dispatched", "completed", "new_task"],
    }
    data.update(changes)
    return data


def listing(crew: Crew, user_id: str, channel: str) -> Any:
    return pipeline.execute(
        actor=Actor.system(crew.team.tenant),
        request=gateway.CallRequest(
            agent=crew.lead, tool="team_tasks", args={"action": "list"}, user_id=user_id, channel=channel
        ),
    ).result


def test_the_settings_page_shows_the_four_access_lists_with_help(admin, crew, tenant_a):
    Team.objects.for_tenant(tenant_a).filter(pk=crew.team.pk).update(
        settings={"deny_user_ids": ["mallory", "eve"]}
    )
    page = admin.get(settings_url(crew)).content.decode()
    for name, label in (
        ("allow_user_ids", "Allowed users"),
        ("deny_user_ids", "Denied users"),
        ("allow_channels", "Allowed channels"),
        ("deny_channels", "Denied channels"),
    ):
        assert f'name="{name}"' in page
        assert f'<label for="id_{name}"' in page
        assert label in page
    assert "one per line or comma-separated" in page
    assert ">\nmallory\neve</textarea>" in page


def test_saved_lists_are_audited_shown_by_the_api_and_enforced_by_the_team_tools(
    admin, admin_a, crew, tenant_a
):
    response = admin.post(
        settings_url(crew),
        form(
            deny_user_ids="mallory, eve\n\nmallory",
            allow_channels="telegram\ndashboard",
            deny_channels="",
            allow_user_ids="",
        ),
        follow=True,
    )
    assert "Settings of Builders saved." in response.content.decode()
    stored = Team.objects.for_tenant(tenant_a).get(pk=crew.team.pk).settings
    assert stored["deny_user_ids"] == ["mallory", "eve"]
    assert stored["allow_channels"] == ["telegram", "dashboard"]
    assert "allow_user_ids" not in stored
    assert "deny_channels" not in stored
    audit = AuditEvent.objects.for_tenant(tenant_a).filter(target_id=str(crew.team.pk))
    latest = audit.order_by("-created_at").first()
    assert latest is not None
    assert latest.data["settings"]["deny_user_ids"] == ["mallory", "eve"]

    api = admin_a.get(f"/api/v1/teams/{crew.team.pk}/")
    assert api.status_code == 200
    assert api.json()["settings"]["deny_user_ids"] == ["mallory", "eve"]

    assert listing(crew, "mallory", "telegram").for_llm == "user mallory is not allowed to use team Builders"
    whatsapp = listing(crew, "alice", "whatsapp")
    assert whatsapp.for_llm == "channel whatsapp is not allowed to use team Builders"
    assert not listing(crew, "alice", "telegram").is_error

    # Emptying a list lifts its restriction.
    admin.post(settings_url(crew), form(deny_user_ids="", allow_channels="telegram\ndashboard"))
    assert not listing(crew, "mallory", "telegram").is_error


def test_bad_lists_change_nothing(admin, crew, tenant_a):
    before = tenant_state(tenant_a)
    long = admin.post(settings_url(crew), form(deny_user_ids="x" * 256)).content.decode()
    assert "Each entry may have at most 255 characters" in long
    many = admin.post(
        settings_url(crew), form(allow_user_ids="\n".join(f"u{i}" for i in range(1001)))
    ).content.decode()
    assert "At most 1000 entries." in many
    assert tenant_state(tenant_a) == before


def test_only_admins_of_the_tenant_change_the_lists(member, crew, tenant_a, tenant_b):
    before = tenant_state(tenant_a)
    assert member.post(settings_url(crew), form(deny_user_ids="bob")).status_code == 403
    other = make_crew(tenant_b, "Theirs")
    outsider = login(factories.make_user(tenant_b, Role.OWNER, email="owner@b.test"))
    assert outsider.post(settings_url(crew), form(deny_user_ids="bob")).status_code == 404
    assert outsider.get(settings_url(crew)).status_code == 404
    assert tenant_state(tenant_a) == before
    assert "deny_user_ids" not in (Team.objects.for_tenant(tenant_b).get(pk=other.team.pk).settings or {})
