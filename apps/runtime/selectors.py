"""The tool listing every transport serves (and the built-in runner, through ``apps.toolkit.gateway``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django_q.models import Failure, OrmQ

from apps.messaging.selectors import call_tool_allow
from apps.policy import engine, listing
from apps.policy.engine import CallScope
from apps.runtime.caller import caller_origin
from apps.tenants.actors import Actor
from apps.tenants.models import Agent
from apps.toolkit import presentation


def agent_tool_definitions(
    *,
    actor: Actor,
    agent: Agent,
    scope: CallScope,
    tool_allow: Sequence[str] | None = None,
    style: presentation.Style = "flat",
    include_unavailable: bool = False,
    session_key: str = "",
) -> list[dict[str, Any]]:
    """The tools ``actor`` may call as ``agent`` in ``scope``, as a call of theirs is decided: the
    policy's, with the channel topic's allow list and the request's own applied, less the tools the
    policy denies to the caller's origin (``originDeny``; a listing names no origin, so it is the
    caller's own, as for a call that names none). What the REST listing, the MCP endpoint and the
    built-in runner serve."""
    tenant = actor.tenant
    allow = call_tool_allow(tenant=tenant, agent=agent, scope=scope, tool_allow=tool_allow)
    policy = engine.resolve(tenant, agent, scope)
    denied = policy.origin_deny.get(caller_origin(actor))
    if denied:
        allow = tuple(name for name in policy.allowed(allow) if name not in denied)
    return listing.definitions(
        tenant=tenant,
        agent=agent,
        scope=scope,
        tool_allow=allow,
        style=style,
        include_unavailable=include_unavailable,
        session_key=session_key,
    )


def background_queue_depth() -> int:
    """Jobs waiting in (or taken from, not yet acknowledged by) django-q2's queue: the operator's metrics."""
    return int(OrmQ.objects.count())


def background_failures_stored() -> int:
    """Failed django-q2 jobs kept in the database (the admin's "Failed tasks"): the operator's metrics."""
    return int(Failure.objects.count())
