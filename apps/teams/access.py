"""Access to one team's objects inside the actor's tenant: a missing object and another tenant's (or
another team's) give the same 404, and so does a team the actor's user grants do not reach
(``apps.teams.visibility``, which also refuses an action without an operator grant). And
:func:`access_refusal`: whether a team's access lists let a caller use it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

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


def access_refusal(settings: Mapping[str, Any], *, user_id: str, channel: str, team_name: str) -> str | None:
    """Why a call from ``user_id`` on ``channel`` may not use the team (B §2.8's access lists), or None.

    Deny beats allow; an empty allow list is open; the internal channels (teammate, system) always pass.
    A stored document is validated, so malformed lists cannot occur (upstream fails open on them)."""
    if channel in ("teammate", "system"):
        return None

    def listed(key: str) -> list[str]:
        value = settings.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    if user_id and user_id in listed("deny_user_ids"):
        return f"user {user_id} is not allowed to use team {team_name}"
    allowed_users = listed("allow_user_ids")
    if allowed_users and user_id not in allowed_users:
        return f"user {user_id or '(none)'} is not allowed to use team {team_name}"
    if channel and channel in listed("deny_channels"):
        return f"channel {channel} is not allowed to use team {team_name}"
    allowed_channels = listed("allow_channels")
    if allowed_channels and channel not in allowed_channels:
        return f"channel {channel or '(none)'} is not allowed to use team {team_name}"
    return None
