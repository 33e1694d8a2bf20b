"""Writes of the knowledge graph. Each is atomic, audited in its transaction and published on the
``knowledge`` topic after commit.

Upserts find an entity by (type, normalised name) in the graph they write to (a user's, or the shared
one with ``user_id == ""``). An existing entity is merged: a given description replaces the old one,
properties are merged key by key (a key set to null is removed), aliases are added to the old ones. A
relation is found by (source, type, target); its properties merge the same way and a given weight
replaces the old one. Relations name their endpoints by type and name: in a user's graph the user's
entity is taken first, then the shared one; a name found nowhere is an error unless the same call
declares the entity (a bulk payload's ``entities``, or ``create_missing``). A name that is no entity's
name but the alias of one entity of that type names that entity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.services import record
from apps.knowledge.models import MAX_ALIASES, Entity, Relation, Source
from apps.knowledge.validation import (
    EntityInput,
    EntityRef,
    RelationInput,
    check_properties,
    clean_aliases,
    clean_description,
    clean_name,
    clean_type,
    clean_user_id,
    invalid,
    name_key,
    union_aliases,
)
from apps.realtime import events
from apps.tenants.actors import Actor
from apps.tenants.errors import Conflict, ErrorCode, ServiceError
from apps.tenants.models import Agent

TOPIC = "knowledge"
SAVED_FIELDS = ("name", "name_key", "entity_type", "description", "properties", "aliases", "alias_keys")


def entity_data(entity: Entity, agent: Agent) -> dict[str, Any]:
    """What audit events and live events say about an entity."""
    return {
        "id": str(entity.pk),
        "agent": agent.key,
        "user_id": entity.user_id,
        "type": entity.entity_type,
        "name": entity.name,
    }


def relation_data(relation: Relation, agent: Agent) -> dict[str, Any]:
    return {
        "id": str(relation.pk),
        "agent": agent.key,
        "user_id": relation.user_id,
        "type": relation.relation_type,
        "source": {
            "id": str(relation.source.pk),
            "type": relation.source.entity_type,
            "name": relation.source.name,
        },
        "target": {
            "id": str(relation.target.pk),
            "type": relation.target.entity_type,
            "name": relation.target.name,
        },
        "weight": relation.weight,
    }


@dataclass
class UpsertResult:
    """The entities and relations an upsert wrote, each with whether it was created, in payload order
    (an item named twice appears once, at its first place)."""

    entities: list[tuple[Entity, bool]] = field(default_factory=list)
    relations: list[tuple[Relation, bool]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "entities_created": sum(1 for _, created in self.entities if created),
            "entities_updated": sum(1 for _, created in self.entities if not created),
            "relations_created": sum(1 for _, created in self.relations if created),
            "relations_updated": sum(1 for _, created in self.relations if not created),
        }


def _check_agent(actor: Actor, agent: Agent) -> None:
    if agent.tenant_id != actor.tenant.pk:
        raise ServiceError(ErrorCode.INVALID, "agent: an agent of this tenant only.")


def _lock_graph(agent: Agent) -> None:
    """Serialise the writes to ``agent``'s graph until the transaction ends. Upserts look entities and
    relations up before creating the missing ones; two at once would both create the same entity."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", ["knowledge", str(agent.pk)]
        )


def merged_properties(old: dict[str, Any], new: dict[str, Any] | None, field: str) -> dict[str, Any]:
    """``old`` updated with ``new``; a key set to null in ``new`` is removed. The result is bounded like
    any properties."""
    if new is None:
        return old
    merged = {**old, **new}
    return check_properties({key: value for key, value in merged.items() if value is not None}, field)


def _merge_entity(entity: Entity, item: EntityInput, where: str) -> None:
    if item.description is not None:
        entity.description = item.description
    entity.properties = merged_properties(entity.properties, item.properties, f"{where}.properties")
    if item.aliases is not None:
        aliases = union_aliases(entity.aliases, item.aliases, name=entity.name)
        if len(aliases) > MAX_ALIASES:
            raise invalid(
                f"{where}.aliases",
                f"{entity} would have {len(aliases)} aliases; an entity has at most {MAX_ALIASES}.",
            )
        entity.aliases = aliases
    entity.alias_keys = [name_key(alias) for alias in entity.aliases]


def _new_entity(actor: Actor, agent: Agent, user_id: str, ref: EntityRef, source: str) -> Entity:
    return Entity(
        tenant=actor.tenant,
        agent=agent,
        user_id=user_id,
        name=ref.name,
        name_key=name_key(ref.name),
        entity_type=ref.entity_type,
        source=source,
        updated_by=actor.label[:255],
    )


def _upsert_entities(
    actor: Actor, agent: Agent, user_id: str, items: list[tuple[str, EntityInput]], source: str
) -> dict[tuple[str, str], tuple[Entity, bool]]:
    """Upsert ``items`` (each with its place in the payload, for errors) into ``user_id``'s graph; the
    entities by (type, name key). Existing rows are locked for the transaction."""
    if not items:
        return {}
    keys = {item.ref.key for _, item in items}
    rows = (
        Entity.objects.for_tenant(actor.tenant)
        .filter(agent_id=agent.pk, user_id=user_id, name_key__in={key for _, key in keys})
        .select_for_update()
        .order_by("pk")
    )
    existing = {
        (row.entity_type, row.name_key): row for row in rows if (row.entity_type, row.name_key) in keys
    }
    result: dict[tuple[str, str], tuple[Entity, bool]] = {}
    for where, item in items:
        key = item.ref.key
        if key not in result:
            if key in existing:
                result[key] = (existing[key], False)
            else:
                result[key] = (_new_entity(actor, agent, user_id, item.ref, source), True)
        _merge_entity(result[key][0], item, where)
    now = timezone.now()
    new = [entity for entity, created in result.values() if created]
    old = [entity for entity, created in result.values() if not created]
    for entity in old:
        entity.updated_by = actor.label[:255]
        entity.updated_at = now
    if old:
        Entity.objects.for_tenant(actor.tenant).bulk_update(old, [*SAVED_FIELDS, "updated_by", "updated_at"])
    if new:
        Entity.objects.bulk_create(new)
    return result


def _resolve(
    actor: Actor,
    agent: Agent,
    user_id: str,
    refs: list[tuple[str, EntityRef]],
    create_missing: bool,
    source: str,
) -> tuple[dict[tuple[str, str], Entity], list[tuple[Entity, bool]]]:
    """The entities ``refs`` name, the user's first, then the shared graph's, and those it created:
    missing ones are created in ``user_id``'s graph when ``create_missing``; else the error names each
    missing one."""
    keys = {ref.key for _, ref in refs}
    scopes = [user_id, ""] if user_id else [""]
    rows = Entity.objects.for_tenant(actor.tenant).filter(
        agent_id=agent.pk, user_id__in=scopes, name_key__in={key for _, key in keys}
    )
    found: dict[tuple[str, str], Entity] = {}
    for row in sorted(rows, key=lambda row: scopes.index(row.user_id)):
        found.setdefault((row.entity_type, row.name_key), row)
    missing = [(where, ref) for where, ref in refs if ref.key not in found]
    if missing:
        found.update(_by_alias(actor, agent, scopes, {ref.key for _, ref in missing}))
        missing = [(where, ref) for where, ref in missing if ref.key not in found]
    made: list[tuple[Entity, bool]] = []
    if missing and create_missing:
        created = _upsert_entities(
            actor, agent, user_id, [(where, EntityInput(ref=ref)) for where, ref in missing], source
        )
        found.update({key: entity for key, (entity, _) in created.items()})
        made = list(created.values())
    elif missing:
        details: dict[str, list[str]] = {}
        for where, ref in missing:
            details.setdefault(where, []).append(
                f"no {ref} in this graph; declare it in entities (or set create_missing) or create it first."
            )
        where, ref = missing[0]
        graph = f"the graph of {user_id!r} or the shared graph" if user_id else "the shared graph"
        raise ServiceError(
            ErrorCode.INVALID,
            f"{where}: no {ref} in {graph}; declare it in entities (or set create_missing) "
            "or create it first.",
            details=details,
        )
    return found, made


def _by_alias(
    actor: Actor, agent: Agent, scopes: list[str], keys: set[tuple[str, str]]
) -> dict[tuple[str, str], Entity]:
    """The entities whose alias is one of ``keys`` (type, name key), when exactly one of a type has it
    (the user's graph before the shared one)."""
    condition = Q()
    for entity_type, key in keys:
        condition |= Q(entity_type=entity_type, alias_keys__contains=[key])
    rows = list(
        Entity.objects.for_tenant(actor.tenant).filter(condition, agent_id=agent.pk, user_id__in=scopes)
    )
    found: dict[tuple[str, str], Entity] = {}
    for scope in scopes:
        for entity_type, key in keys:
            owners = [
                row
                for row in rows
                if row.user_id == scope and row.entity_type == entity_type and key in row.alias_keys
            ]
            if (entity_type, key) not in found and len(owners) == 1:
                found[(entity_type, key)] = owners[0]
    return found


def _relation_scope(source: Entity, target: Entity, where: str) -> str:
    if source.user_id and target.user_id and source.user_id != target.user_id:
        raise invalid(where, "a relation links entities of one user's graph, or of the shared graph.")
    return source.user_id or target.user_id


def _upsert_relations(
    actor: Actor,
    agent: Agent,
    user_id: str,
    items: list[tuple[str, RelationInput]],
    create_missing: bool,
    source: str,
) -> tuple[list[tuple[Relation, bool]], list[tuple[Entity, bool]]]:
    """Upsert ``items``; returns the relations and the endpoints ``create_missing`` created."""
    if not items:
        return [], []
    refs = [
        (f"{where}.{end}", ref)
        for where, item in items
        for end, ref in (("source", item.source), ("target", item.target))
    ]
    entities, made = _resolve(actor, agent, user_id, refs, create_missing, source)
    planned: list[tuple[str, RelationInput, Entity, Entity]] = [
        (where, item, entities[item.source.key], entities[item.target.key]) for where, item in items
    ]
    relations = Relation.objects.for_tenant(actor.tenant)

    rows = (
        relations.filter(
            source_id__in={s.pk for _, _, s, _ in planned},
            target_id__in={t.pk for _, _, _, t in planned},
            relation_type__in={item.relation_type for _, item, _, _ in planned},
        )
        .select_for_update()
        .order_by("pk")
    )
    existing = {(row.source_id, row.relation_type, row.target_id): row for row in rows}
    result: dict[tuple[Any, str, Any], tuple[Relation, bool]] = {}
    for where, item, start, end in planned:
        key = (start.pk, item.relation_type, end.pk)
        scope = _relation_scope(start, end, where)
        if key not in result:
            row = existing.get(key)
            if row is None:
                row = Relation(
                    tenant=actor.tenant,
                    agent=agent,
                    user_id=scope,
                    source=start,
                    relation_type=item.relation_type,
                    target=end,
                    origin=source,
                )
            result[key] = (row, key not in existing)
        relation = result[key][0]
        relation.source, relation.target = start, end
        relation.properties = merged_properties(relation.properties, item.properties, f"{where}.properties")
        if item.weight_given:
            relation.weight = item.weight
        relation.updated_by = actor.label[:255]
    now = timezone.now()
    old = [relation for relation, created in result.values() if not created]
    new = [relation for relation, created in result.values() if created]
    for relation in old:
        relation.updated_at = now
    if old:
        relations.bulk_update(old, ["properties", "weight", "updated_by", "updated_at"])
    if new:
        Relation.objects.bulk_create(new)
    return list(result.values()), made


def _source(value: str) -> str:
    if value not in Source.values:
        raise ServiceError(ErrorCode.INVALID, f"source: one of {', '.join(Source.values)}.")
    return value


def _publish(actor: Actor, verb: str, target_type: str, data: dict[str, Any]) -> None:
    record(actor=actor, verb=verb, target_type=target_type, target_id=str(data.get("id", "")), data=data)
    events.publish(tenant=actor.tenant, topic=TOPIC, type=verb, data=data)


def _announce(actor: Actor, agent: Agent, result: UpsertResult) -> None:
    for entity, created in result.entities:
        verb = "knowledge.entity_created" if created else "knowledge.entity_updated"
        _publish(actor, verb, "knowledge_entity", entity_data(entity, agent))
    for relation, created in result.relations:
        verb = "knowledge.relation_created" if created else "knowledge.relation_updated"
        _publish(actor, verb, "knowledge_relation", relation_data(relation, agent))


@transaction.atomic
def entity_upsert(
    *, actor: Actor, agent: Agent, user_id: str, item: EntityInput, source: str = Source.API
) -> tuple[Entity, bool]:
    """Create ``item`` in ``user_id``'s graph of ``agent`` ("" = the shared graph), or merge it into the
    entity of the same type and name. Returns the entity and whether it was created."""
    _check_agent(actor, agent)
    _lock_graph(agent)
    user_id = clean_user_id(user_id)
    written = _upsert_entities(actor, agent, user_id, [("entity", item)], _source(source))
    entity, created = written[item.ref.key]
    _announce(actor, agent, UpsertResult(entities=[(entity, created)]))
    return entity, created


@transaction.atomic
def relation_upsert(
    *,
    actor: Actor,
    agent: Agent,
    user_id: str,
    item: RelationInput,
    create_missing: bool = False,
    source: str = Source.API,
) -> tuple[Relation, bool]:
    """Create or update the relation ``item`` names; its endpoints are found by type and name (the
    user's, then the shared graph's), and created in ``user_id``'s graph when ``create_missing``."""
    _check_agent(actor, agent)
    _lock_graph(agent)
    user_id = clean_user_id(user_id)
    [(relation, created)], made = _upsert_relations(
        actor, agent, user_id, [("relation", item)], create_missing, _source(source)
    )
    _announce(actor, agent, UpsertResult(entities=made, relations=[(relation, created)]))
    return relation, created


@transaction.atomic
def graph_upsert(
    *,
    actor: Actor,
    agent: Agent,
    user_id: str,
    entities: list[EntityInput],
    relations: list[RelationInput],
    source: str = Source.API,
) -> UpsertResult:
    """Upsert ``entities`` and then ``relations`` in one transaction: all of it is written, or (on the
    first error) none of it. A relation may name an entity of ``entities``, of ``user_id``'s graph or of
    the shared graph. One audit event and one live event (``knowledge.graph_upserted``) say what
    changed, with counts."""
    _check_agent(actor, agent)
    _lock_graph(agent)
    user_id = clean_user_id(user_id)
    source = _source(source)
    written = _upsert_entities(
        actor, agent, user_id, [(f"entities[{index}]", item) for index, item in enumerate(entities)], source
    )
    result = UpsertResult(entities=list(written.values()))
    result.relations, _ = _upsert_relations(
        actor,
        agent,
        user_id,
        [(f"relations[{index}]", item) for index, item in enumerate(relations)],
        False,
        source,
    )
    data = {"agent": agent.key, "user_id": user_id, "source": source, **result.counts()}
    record(
        actor=actor,
        verb="knowledge.graph_upserted",
        target_type="knowledge_graph",
        target_id=agent.key,
        data=data,
    )
    events.publish(tenant=actor.tenant, topic=TOPIC, type="knowledge.graph_upserted", data=data)
    return result


def _check_entity(actor: Actor, agent: Agent, entity: Entity) -> None:
    if entity.tenant_id != actor.tenant.pk or entity.agent_id != agent.pk:
        raise ServiceError(ErrorCode.INVALID, "entity: an entity of this agent only.")


@transaction.atomic
def entity_update(
    *,
    actor: Actor,
    agent: Agent,
    entity: Entity,
    name: Any = None,
    entity_type: Any = None,
    description: Any = None,
    properties: Any = None,
    aliases: Any = None,
) -> Entity:
    """Set the given fields of ``entity`` (``None``: unchanged). Properties and aliases are replaced, not
    merged. A new type or name that another entity of the graph has is a conflict (409)."""
    _check_entity(actor, agent, entity)
    _lock_graph(agent)
    entity = Entity.objects.for_tenant(actor.tenant).select_for_update().get(pk=entity.pk)
    if name is not None:
        entity.name = clean_name(name, "name")
        entity.name_key = name_key(entity.name)
    if entity_type is not None:
        entity.entity_type = clean_type(entity_type, "type")
    if description is not None:
        entity.description = clean_description(description, "description")
    if properties is not None:
        entity.properties = check_properties(properties, "properties")
    if aliases is not None:
        entity.aliases = clean_aliases(aliases, "aliases")
    entity.aliases = union_aliases([], entity.aliases, name=entity.name)
    entity.alias_keys = [name_key(alias) for alias in entity.aliases]
    clash = (
        Entity.objects.for_tenant(actor.tenant)
        .filter(
            agent_id=agent.pk,
            user_id=entity.user_id,
            entity_type=entity.entity_type,
            name_key=entity.name_key,
        )
        .exclude(pk=entity.pk)
        .first()
    )
    if clash is not None:
        message = (
            f"this graph already has {clash.entity_type} {clash.name!r}; merge into it or pick another name."
        )
        raise Conflict(ErrorCode.CONFLICT, f"name: {message}", details={"name": [message]})
    entity.updated_by = actor.label[:255]
    try:
        with transaction.atomic():
            entity.save(update_fields=[*SAVED_FIELDS, "updated_by", "updated_at"])
    except IntegrityError:
        raise Conflict(ErrorCode.CONFLICT, "name: this graph already has that entity.") from None
    _publish(actor, "knowledge.entity_updated", "knowledge_entity", entity_data(entity, agent))
    return entity


@transaction.atomic
def entity_delete(*, actor: Actor, agent: Agent, entity: Entity) -> int:
    """Delete ``entity`` and every relation from or to it; returns how many relations went with it."""
    _check_entity(actor, agent, entity)
    data = entity_data(entity, agent)
    relations = Relation.objects.for_tenant(actor.tenant).filter(agent_id=agent.pk)
    removed, _ = relations.filter(Q(source_id=entity.pk) | Q(target_id=entity.pk)).delete()
    Entity.objects.for_tenant(actor.tenant).filter(pk=entity.pk).delete()
    data["relations_deleted"] = removed
    _publish(actor, "knowledge.entity_deleted", "knowledge_entity", data)
    return removed


@transaction.atomic
def relation_delete(*, actor: Actor, agent: Agent, relation: Relation) -> None:
    if relation.tenant_id != actor.tenant.pk or relation.agent_id != agent.pk:
        raise ServiceError(ErrorCode.INVALID, "relation: a relation of this agent only.")
    data = relation_data(relation, agent)
    Relation.objects.for_tenant(actor.tenant).filter(pk=relation.pk).delete()
    _publish(actor, "knowledge.relation_deleted", "knowledge_relation", data)
