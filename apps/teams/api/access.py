"""Access to one team's objects inside the actor's tenant: a missing object and another tenant's (or
another team's) give the same 404, and so does a team the actor's user grants do not reach
(``apps.teams.access``); acting there without an operator grant is 403."""

from __future__ import annotations

import uuid

from django.http import Http404

from apps.teams import selectors
from apps.teams.access import act_refusal
from apps.teams.models import Team, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
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


def require_act(*, actor: Actor, team: Team) -> None:
    """Refuse (403) an action on the team's tasks or escalations that the actor's grant does not allow."""
    refusal = act_refusal(actor, team)
    if refusal is not None:
        raise ServiceError(ErrorCode.PERMISSION_DENIED, refusal, status=403)


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


def agent_named(*, actor: Actor, field: str, key: str) -> Agent:
    """The tenant's agent ``key`` named in a request body: a missing one (or another tenant's) is an
    invalid input naming the field."""
    agent = selectors.agent_get(tenant=actor.tenant, key=key)
    if agent is None:
        raise ServiceError(
            ErrorCode.INVALID,
            f"{field}: no agent {key[:64]!r} in this tenant.",
            details={field: ["Unknown agent."]},
        )
    return agent
