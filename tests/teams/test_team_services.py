"""Teams themselves: creation rules, settings validation, members, archiving, and an agent that leads a
team cannot be deleted from under it."""

from __future__ import annotations

import pytest

from apps.accounts import services as tenant_services
from apps.audit.models import AuditEvent
from apps.teams import services
from apps.teams import team_settings as ts
from apps.teams.models import Team, TeamMember
from apps.tenants.actors import Actor
from apps.tenants.errors import ServiceError
from tests.teams.conftest import make_crew

pytestmark = pytest.mark.django_db


def agent(tenant, key):  # type: ignore[no-untyped-def]
    return tenant_services.agent_create(actor=Actor.system(tenant), key=key, name=key)


def test_a_team_has_a_lead_and_members_and_is_audited(tenant_a):
    crew = make_crew(tenant_a)
    roles = dict(
        TeamMember.objects.for_tenant(tenant_a).filter(team=crew.team).values_list("agent__key", "role")
    )
    assert roles == {crew.lead.key: "lead", crew.alice.key: "member", crew.bob.key: "member"}
    assert crew.team.settings == {"version": 2}
    event = AuditEvent.objects.for_tenant(tenant_a).get(verb="team.created")
    assert event.data["lead"] == crew.lead.key


def test_creation_rules(tenant_a, tenant_b):
    system = Actor.system(tenant_a)
    lead, member = agent(tenant_a, "lead"), agent(tenant_a, "member")
    with pytest.raises(ServiceError, match="at least one member"):
        services.team_create(actor=system, name="Solo", lead=lead, members=[lead])
    services.team_create(actor=system, name="One", lead=lead, members=[member])
    with pytest.raises(ServiceError, match="already leads a team"):
        services.team_create(actor=system, name="Two", lead=lead, members=[member])
    with pytest.raises(ServiceError, match="exists already"):
        services.team_create(actor=system, name="One", lead=member, members=[lead])
    foreign = agent(tenant_b, "foreign")
    with pytest.raises(ServiceError, match="agents of this tenant only"):
        services.team_create(actor=system, name="Mixed", lead=member, members=[foreign])
    assert Team.objects.for_tenant(tenant_a).count() == 1


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"blocker_escalation": {"enabled": "no"}}, "blocker_escalation"),
        ({"blocker_escalation": {"enabled": False, "x": 1}}, "blocker_escalation"),
        ({"followup_interval_minutes": 0}, "followup_interval_minutes"),
        ({"followup_max_reminders": -1}, "followup_max_reminders"),
        ({"notifications": {"completed": "yes"}}, "notifications"),
        ({"workspace_scope": "everywhere"}, "workspace_scope"),
        ({"allow_channels": ["ok", 3]}, "allow_channels"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_settings_are_validated(tenant_a, settings, key):
    crew = make_crew(tenant_a)
    with pytest.raises(ServiceError) as refused:
        services.team_update_settings(actor=Actor.system(tenant_a), team=crew.team, settings=settings)
    assert key in refused.value.details


def test_settings_reads_have_defaults():
    assert ts.blocker_escalation({}) is True
    assert ts.blocker_escalation({"blocker_escalation": {"enabled": False}}) is False
    assert ts.followup_interval_minutes({}) == 30
    assert ts.followup_max_reminders({}) == 0
    assert ts.member_requests({}) == (False, False)
    assert ts.notifications({})["completed"] is True
    assert ts.notifications({"notifications": {"completed": False}})["completed"] is False


def test_members_come_and_go_but_the_lead_stays(tenant_a):
    crew = make_crew(tenant_a)
    system = Actor.system(tenant_a)
    newcomer = agent(tenant_a, "newcomer")
    services.member_add(actor=system, team=crew.team, agent=newcomer)
    with pytest.raises(ServiceError, match="already a member"):
        services.member_add(actor=system, team=crew.team, agent=newcomer)
    services.member_remove(actor=system, team=crew.team, agent=newcomer)
    with pytest.raises(ServiceError, match="not a member"):
        services.member_remove(actor=system, team=crew.team, agent=newcomer)
    with pytest.raises(ServiceError, match="lead cannot be removed"):
        services.member_remove(actor=system, team=crew.team, agent=crew.lead)
    archived = services.team_archive(actor=system, team=crew.team)
    assert archived.status == "archived"
    with pytest.raises(ServiceError, match="already archived"):
        services.team_archive(actor=system, team=crew.team)


def test_an_agent_that_leads_a_team_cannot_be_deleted(tenant_a, admin_a):
    crew = make_crew(tenant_a)
    response = admin_a.delete(f"/api/v1/agents/{crew.lead.key}/")
    assert response.status_code == 409
    assert "leads the team Builders" in response.json()["error"]["message"]
    assert admin_a.delete(f"/api/v1/agents/{crew.alice.key}/").status_code == 204
    assert not TeamMember.objects.for_tenant(tenant_a).filter(agent_id=crew.alice.pk).exists()
