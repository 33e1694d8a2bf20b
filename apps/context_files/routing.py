"""Where a context file lives for a tool call, by the agent's type (seed 000 §3, SPEC Part A and B §8).

* Open agents: every file is per user. A read takes the user's own copy, else the agent's text (the
  template); a write goes to the user's copy.
* Predefined agents: USER.md and BOOTSTRAP.md are per user (same fallback on read). HEARTBEAT.md is the
  agent's, read and written by its tools. SOUL.md, IDENTITY.md, AGENTS.md and TOOLS.md are the agent's
  predefined configuration: already in its context, so reads are refused, and writes too. BOOTSTRAP.md
  can only be emptied (the first run is done), never rewritten.

Per-user reads and writes need the call's user id; without one a read takes the agent's text and a
write is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from apps.tenants.models import Agent

BOOTSTRAP = "BOOTSTRAP.md"
HEARTBEAT = "HEARTBEAT.md"
USER = "USER.md"


class Place(StrEnum):
    USER = "user"  # the user's copy (reads fall back to the agent's text)
    AGENT = "agent"  # the agent's text, shared by every user
    REFUSED = "refused"
    CLEAR_ONLY = "clear_only"  # only an empty write (which deletes the user's copy) is accepted


@dataclass(frozen=True)
class Route:
    read: Place
    write: Place


def route(agent_type: str, name: str) -> Route:
    """How calls of an agent of ``agent_type`` reach ``name`` (one of ``models.NAMES``)."""
    if agent_type != Agent.Type.PREDEFINED:
        return Route(read=Place.USER, write=Place.USER)
    if name == USER:
        return Route(read=Place.USER, write=Place.USER)
    if name == BOOTSTRAP:
        return Route(read=Place.USER, write=Place.CLEAR_ONLY)
    if name == HEARTBEAT:
        return Route(read=Place.AGENT, write=Place.AGENT)
    return Route(read=Place.REFUSED, write=Place.REFUSED)


def describe(agent_type: str, name: str) -> str:
    """One sentence for administrators: what the agent's tools do with ``name``."""
    r = route(agent_type, name)
    if r.read == Place.REFUSED:
        return "Predefined configuration: in the agent's context; its tools can neither read nor change it."
    if r.write == Place.CLEAR_ONLY:
        return (
            "Per user: each user's own copy, this text when they have none. The agent can only empty "
            "it (first run done), which deletes the user's copy."
        )
    if r.read == Place.USER and name == BOOTSTRAP:
        return (
            "Per user: each user's own copy, this text as the template when they have none. Writing it "
            "empty (first run done) deletes the user's copy."
        )
    if r.read == Place.USER:
        return "Per user: each user's own copy, this text as the template when they have none."
    return "Shared by every user: the agent's tools read and change this text."
