"""Which humans may see and act on a team: its user grants (``TeamUserGrant``).

A team without grants is open: the tenant role alone decides (viewers read, members act, admins
configure). A team with at least one grant is restricted for dashboard users below admin: such a user
sees it only with a grant whose ``user_id`` is their email (compared case-insensitively), and acts on
its tasks and escalations only with an ``operator`` grant (and at least the member role). Without a
grant the team is treated as missing. Admins and owners are never restricted; API keys are machine
credentials whose role alone decides, and so is the system.
"""

from __future__ import annotations

import uuid

from django.db.models import Exists, OuterRef, Q

from apps.teams.models import Team, TeamUserGrant
from apps.tenants.actors import Actor
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.roles import Role


def restricted(actor: Actor) -> bool:
    """Whether grants limit what ``actor`` reaches (dashboard users below admin)."""
    return actor.kind == "user" and not actor.can(Role.ADMIN)


def grant_user_id(actor: Actor) -> str:
    """The id a grant names ``actor`` by: the user's email ("" when there is none)."""
    if actor.user is None:
        return ""
    return str(getattr(actor.user, "email", "") or "").strip()


def team_visibility(actor: Actor, field: str = "pk") -> Q:
    """A filter keeping the teams ``actor`` may see; ``field`` names the team's id on the filtered
    model (``"pk"`` on teams, ``"team_id"`` on their tasks or escalations)."""
    if not restricted(actor):
        return Q()
    grants = TeamUserGrant.objects.for_tenant(actor.tenant).filter(team_id=OuterRef(field))
    visible = Q(~Exists(grants))
    email = grant_user_id(actor)
    if email:
        visible |= Q(Exists(grants.filter(user_id__iexact=email)))
    return visible


def grant_role(actor: Actor, team: Team) -> str | None:
    """The role of the grant naming ``actor`` on ``team``, or None."""
    email = grant_user_id(actor)
    if not email:
        return None
    grant = (
        TeamUserGrant.objects.for_tenant(actor.tenant)
        .filter(team_id=team.pk, user_id__iexact=email)
        .order_by("created_at", "id")
        .first()
    )
    return None if grant is None else grant.role


def _has_grants(actor: Actor, team: Team) -> bool:
    return TeamUserGrant.objects.for_tenant(actor.tenant).filter(team_id=team.pk).exists()


def can_view(actor: Actor, team: Team) -> bool:
    """Whether ``actor`` may see ``team`` (its board, tasks, escalations, events and live topic)."""
    if team.tenant_id != actor.tenant.pk:
        return False
    if not restricted(actor) or not _has_grants(actor, team):
        return True
    return grant_role(actor, team) is not None


def act_refusal(actor: Actor, team: Team) -> str | None:
    """Why ``actor`` may not act on ``team``'s tasks and escalations, or None when it may."""
    if not actor.can(Role.MEMBER):
        return f"Acting on tasks needs the member role; you are {actor.role}."
    if not restricted(actor) or not _has_grants(actor, team):
        return None
    role = grant_role(actor, team)
    if role == TeamUserGrant.Role.OPERATOR:
        return None
    if role is None:
        return f"You have no grant on team {team.name}."
    return (
        f"Your grant on team {team.name} is {role}: acting on its tasks and escalations needs an "
        "operator grant."
    )


def require_act(*, actor: Actor, team: Team) -> None:
    """Refuse (403) an action on the team's tasks or escalations that the actor's grant does not allow."""
    refusal = act_refusal(actor, team)
    if refusal is not None:
        raise ServiceError(ErrorCode.PERMISSION_DENIED, refusal, status=403)


def can_act(actor: Actor, team: Team) -> bool:
    """Whether ``actor`` may act on ``team``'s tasks and escalations."""
    return act_refusal(actor, team) is None


def visible_team_ids(actor: Actor, ids: set[uuid.UUID]) -> set[uuid.UUID]:
    """Those of ``ids`` naming a team of the actor's tenant that ``actor`` may see. A team of another
    tenant, one that does not exist and (for a restricted actor) one its grants do not reach are all
    equally invisible, so a refusal says nothing about which teams exist anywhere."""
    if not ids:
        return set()
    found = (
        Team.objects.for_tenant(actor.tenant)
        .filter(team_visibility(actor), pk__in=ids)
        .values_list("pk", flat=True)
    )
    return set(found)
