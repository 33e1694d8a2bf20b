"""Object access inside the actor's tenant: missing and another tenant's objects give the same 404."""

from __future__ import annotations

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
