"""Object access inside the actor's tenant: missing and another tenant's objects give the same 404."""

from __future__ import annotations

import threading
import uuid

from django.http import Http404

from apps.tenants.actors import Actor
from apps.tenants.models import Agent, ApiKey, Membership


def _uuid_or_404(value: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def access_agent(*, actor: Actor, key: str) -> Agent:
    agent = Agent.objects.for_tenant(actor.tenant).filter(key=key).first()
    if agent is None:
        raise Http404("No agent with this key.")
    return agent


# (tenant id, config_version, key) -> agent; see ``access_runtime_agent``.
_RUNTIME_AGENTS: dict[tuple[uuid.UUID, int, str], Agent] = {}
_RUNTIME_AGENTS_MAX = 4096
_runtime_agents_lock = threading.Lock()


def access_runtime_agent(*, actor: Actor, key: str) -> Agent:
    """``access_agent`` for the hot path of agent loops (execute, tool listing), without its query when
    this process has served the agent since the tenant's configuration last changed.

    The entry is keyed by the tenant's ``config_version`` as this request read it (with its tenant, at
    authentication), which every agent change raises in its own transaction: a changed, renamed or
    deleted agent is never served, here or in any other process, once the change has committed. The
    agent returned is shared between requests: read it, never change or save it."""
    tenant = actor.tenant
    cache_key = (tenant.pk, tenant.config_version, key)
    agent = _RUNTIME_AGENTS.get(cache_key)
    if agent is None:
        agent = access_agent(actor=actor, key=key)
        with _runtime_agents_lock:
            if len(_RUNTIME_AGENTS) >= _RUNTIME_AGENTS_MAX:
                # Entries of older versions are dead weight; dropping all is simpler than tracking age.
                _RUNTIME_AGENTS.clear()
            _RUNTIME_AGENTS[cache_key] = agent
    return agent


def access_api_key(*, actor: Actor, id: object) -> ApiKey:
    key = ApiKey.objects.for_tenant(actor.tenant).filter(pk=_uuid_or_404(id)).first()
    if key is None:
        raise Http404("No API key with this id.")
    return key


def access_membership(*, actor: Actor, id: object) -> Membership:
    membership = (
        Membership.objects.for_tenant(actor.tenant).select_related("user").filter(pk=_uuid_or_404(id)).first()
    )
    if membership is None:
        raise Http404("No membership with this id.")
    return membership
