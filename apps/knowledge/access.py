"""Access to one entity or relation of an agent's knowledge graph: a missing one and another tenant's
(or another agent's) give the same 404."""

from __future__ import annotations

import uuid

from django.http import Http404

from apps.knowledge.models import Entity, Relation
from apps.knowledge.selectors import entities, relations
from apps.tenants.models import Agent, Tenant


def _uuid_or_none(value: object) -> str | None:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


def access_entity(*, tenant: Tenant, agent: Agent, id: object) -> Entity:
    """The entity of ``agent`` with this id, or 404 (missing and another tenant's look the same)."""
    pk = _uuid_or_none(id)
    entity = entities(tenant, agent).filter(pk=pk).first() if pk else None
    if entity is None:
        raise Http404("No entity with this id in this agent's knowledge graph.")
    return entity


def access_relation(*, tenant: Tenant, agent: Agent, id: object) -> Relation:
    pk = _uuid_or_none(id)
    relation = relations(tenant, agent).filter(pk=pk).first() if pk else None
    if relation is None:
        raise Http404("No relation with this id in this agent's knowledge graph.")
    return relation
