from __future__ import annotations

from dataclasses import dataclass

import pytest

from apps.accounts import services as tenant_services
from apps.teams import services
from apps.teams.board import BoardActor
from apps.teams.models import Team
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant


@dataclass
class Crew:
    team: Team
    lead: Agent
    alice: Agent
    bob: Agent

    @property
    def as_lead(self) -> BoardActor:
        return BoardActor.of_agent(self.lead)

    @property
    def as_alice(self) -> BoardActor:
        return BoardActor.of_agent(self.alice)

    @property
    def as_bob(self) -> BoardActor:
        return BoardActor.of_agent(self.bob)


def make_crew(tenant: Tenant, name: str = "Builders", **settings) -> Crew:  # type: ignore[no-untyped-def]
    system = Actor.system(tenant)
    agents = [
        tenant_services.agent_create(actor=system, key=f"{name.lower()}-{role}", name=role)
        for role in ("lead", "alice", "bob")
    ]
    team = services.team_create(
        actor=system, name=name, lead=agents[0], members=agents[1:], settings=settings or None
    )
    return Crew(
        team=Team.objects.for_tenant(tenant).select_related("tenant", "lead").get(pk=team.pk),
        lead=agents[0],
        alice=agents[1],
        bob=agents[2],
    )


@pytest.fixture
def crew(tenant_a: Tenant) -> Crew:
    return make_crew(tenant_a)
