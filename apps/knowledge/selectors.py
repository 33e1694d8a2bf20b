"""Reads of the knowledge graph for the API and the dashboard: an agent's entities and relations, an
entity's relations (one entity or relation for a request: ``apps.knowledge.access``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Q, QuerySet, TextField, Window
from django.db.models.functions import Cast, RowNumber

from apps.knowledge.models import Entity, Relation
from apps.knowledge.validation import name_key
from apps.tenants.models import Agent, Tenant


def entities(tenant: Tenant, agent: Agent) -> QuerySet[Entity]:
    """Every entity of ``agent`` (every user's and the shared ones), without the search vector."""
    return Entity.objects.for_tenant(tenant).filter(agent_id=agent.pk).defer("search_vector")


def entity_list(
    *,
    tenant: Tenant,
    agent: Agent,
    entity_type: str | None = None,
    q: str = "",
    user_id: str | None = None,
) -> QuerySet[Entity]:
    """An agent's entities by name: ``entity_type`` one type, ``user_id`` one user's graph ("" the shared
    one), ``q`` a piece of the name, an alias or the description (case-insensitive)."""
    queryset = entities(tenant, agent)
    if entity_type:
        queryset = queryset.filter(entity_type=entity_type)
    if user_id is not None:
        queryset = queryset.filter(user_id=user_id)
    if q.strip():
        words = " ".join(q.split())
        queryset = queryset.annotate(aliases_text=Cast("aliases", TextField())).filter(
            Q(name_key__contains=name_key(words))
            | Q(aliases_text__icontains=words)
            | Q(description__icontains=words)
        )
    return queryset.order_by("name_key", "entity_type", "user_id", "id")


def entity_types(*, tenant: Tenant, agent: Agent) -> list[str]:
    """The types the agent's graph uses, sorted."""
    rows = entities(tenant, agent).order_by("entity_type").values_list("entity_type", flat=True).distinct()
    return list(rows)


def relations(tenant: Tenant, agent: Agent) -> QuerySet[Relation]:
    return (
        Relation.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk)
        .select_related("source", "target")
        .defer("search_vector", "source__search_vector", "target__search_vector")
    )


def relation_list(
    *,
    tenant: Tenant,
    agent: Agent,
    relation_type: str | None = None,
    user_id: str | None = None,
    entity: Entity | None = None,
) -> QuerySet[Relation]:
    """An agent's relations: ``relation_type`` one type, ``user_id`` one user's graph ("" the shared one),
    ``entity`` those from or to it."""
    queryset = relations(tenant, agent)
    if relation_type:
        queryset = queryset.filter(relation_type=relation_type)
    if user_id is not None:
        queryset = queryset.filter(user_id=user_id)
    if entity is not None:
        queryset = queryset.filter(Q(source_id=entity.pk) | Q(target_id=entity.pk))
    return queryset.order_by("source__name_key", "relation_type", "target__name_key", "id")


@dataclass(frozen=True)
class Bounded:
    """At most ``limit`` relations of one side of an entity, and how many there are in all."""

    relations: list[Relation]
    total: int


def _ranked(queryset: QuerySet[Relation], partition: str, limit: int) -> QuerySet[Relation]:
    """Relations ranked within their ``partition`` (an endpoint column): strongest first, then by type."""
    order = [F("weight").desc(nulls_last=True), F("relation_type").asc(), F("id").asc()]
    return queryset.annotate(
        position=Window(RowNumber(), partition_by=[F(partition)], order_by=order),
        total=Window(Count("id"), partition_by=[F(partition)]),
    ).filter(position__lte=limit)  # type: ignore[misc]


def bounded_relations(
    *, tenant: Tenant, agent: Agent, ids: list[object], limit: int, user_ids: list[str] | None = None
) -> tuple[dict[object, Bounded], dict[object, Bounded]]:
    """For each entity of ``ids``: its outgoing and its incoming relations, at most ``limit`` of each
    (strongest first), with their totals. ``user_ids`` keeps the relations of those graphs only. Two
    queries whatever the number of entities."""
    base = relations(tenant, agent)
    if user_ids is not None:
        base = base.filter(user_id__in=user_ids)
    outgoing: dict[object, Bounded] = {}
    incoming: dict[object, Bounded] = {}
    for column, found in (("source_id", outgoing), ("target_id", incoming)):
        ranked = _ranked(base.filter(**{f"{column}__in": ids}), column, limit)
        for row in ranked.order_by(column, "position"):  # type: ignore[misc]
            key = getattr(row, column)
            entry = found.setdefault(key, Bounded([], int(row.total)))  # type: ignore[attr-defined]
            entry.relations.append(row)
    return outgoing, incoming
