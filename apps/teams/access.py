"""Access to one team's objects inside the actor's tenant: a missing object and another tenant's (or
another team's) give the same 404, and so does a team the actor's user grants do not reach
(``apps.teams.visibility``, which also refuses an action without an operator grant)."""

from __future__ import annotations

import uuid

from django.http import Http404

from apps.teams import selectors
from apps.teams.models import Team, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.models import Agent


def _uuid_or_404(value: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def access_team(*, actor: Actor, id: object) -> Team:
    team = selectors.team_get(actor=actor, id=_uuid_or_404(id))
    if team is None:
        raise Http404("No team with this id.")
    return team


def access_member(*, actor: Actor, team: Team, key: str) -> Agent:
    """The agent ``key`` as a member of ``team``."""
    member = selectors.member_get(tenant=actor.tenant, team=team, key=key)
    if member is None:
        raise Http404(f"{key[:64]} is not a member of this team.")
    return member.agent


def access_grant(*, actor: Actor, team: Team, id: object) -> TeamUserGrant:
    grant = selectors.grant_get(tenant=actor.tenant, team=team, id=_uuid_or_404(id))
    if grant is None:
        raise Http404("No grant with this id on this team.")
    return grant
