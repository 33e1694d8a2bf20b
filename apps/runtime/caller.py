"""What a tool call's caller may say about itself: its origin and its channel.

A call's **origin** (``user``, ``comm``, ``app``, ``skill``, ``system``) decides the policy's
``originDeny`` lists and whether an exec command that would ask a human is approved without asking
(origin ``system``). It is therefore derived from the authenticated caller, never taken from the
request:

* a dashboard user's calls are ``user``;
* an API key's calls have the key's origin (``user`` unless an owner made it for a channel integration,
  an application or a skill: :class:`apps.tenants.models.ApiKey`);
* ``system`` belongs to Toolgate's own code (the system actor of background jobs), which names the
  origin it runs with; without one it is ``user``, so nothing is approved without asking by accident.

A request may name its origin only to repeat its caller's: any other is refused (403) before anything
runs or is recorded.

The channels ``teammate``, ``system`` and ``dashboard`` are Toolgate's own too: team tools give calls on
them the lead's and an approver's rights, every user's tasks and a pass through the team's access
lists. A key or a dashboard user naming one is refused (403) the same way.

Every other field of a call's context may only narrow what the caller gets (see
``apps.runtime.api.serializers.CallContextInput``).
"""

from __future__ import annotations

from enum import StrEnum

from apps.tenants.actors import Actor
from apps.tenants.errors import Forbidden

SYSTEM = "system"
DEFAULT_ORIGIN = "user"
ORIGINS = ("user", "comm", "app", "skill", SYSTEM)
INTERNAL_CHANNELS = ("teammate", "system", "dashboard")


class CallerErrorCode(StrEnum):
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    CHANNEL_RESERVED = "channel_reserved"


def caller_origin(actor: Actor) -> str:
    """The origin of ``actor``'s calls when the call names none."""
    if actor.kind == "api_key" and actor.api_key is not None:
        return str(actor.api_key.origin)
    return DEFAULT_ORIGIN


def allowed_origins(actor: Actor) -> tuple[str, ...]:
    """The origins ``actor`` may act as: its own alone, or every one for Toolgate's own code."""
    if actor.kind == "system":
        return ORIGINS
    return (caller_origin(actor),)


def effective_origin(*, actor: Actor, requested: str | None) -> str:
    """The origin a call of ``actor`` runs with: the caller's own when ``requested`` is None or names
    it. Any other origin is refused with :class:`Forbidden` (``origin_not_allowed``), so a client
    cannot declare its way past an approval or an ``originDeny`` list."""
    own = caller_origin(actor)
    if requested is None or requested == own:
        return own
    if requested in allowed_origins(actor):
        return requested
    who = "this API key" if actor.kind == "api_key" else "a dashboard user"
    if requested == SYSTEM:
        why = "origin 'system' belongs to Toolgate's own jobs and no request can take it"
    else:
        why = f"origin '{requested}' is not allowed for {who}"
    raise Forbidden(
        CallerErrorCode.ORIGIN_NOT_ALLOWED,
        f"{why}: calls of {who} have origin '{own}'. Leave origin out of the context, or send '{own}'.",
        details={"origin": [f"Must be '{own}' or left out."]},
    )


def check_channel(*, actor: Actor, channel: str) -> None:
    """Refuse (:class:`Forbidden`, ``channel_reserved``) a call of a key or a dashboard user on one of
    Toolgate's internal channels, which carry rights in team tools that no request may claim."""
    if actor.kind != "system" and channel in INTERNAL_CHANNELS:
        raise Forbidden(
            CallerErrorCode.CHANNEL_RESERVED,
            f"channel '{channel}' is one of Toolgate's internal channels "
            f"({', '.join(INTERNAL_CHANNELS)}); a request cannot name it. Use the channel the "
            "conversation really comes from, or none.",
            details={"channel": ["An internal channel; a request cannot name it."]},
        )
