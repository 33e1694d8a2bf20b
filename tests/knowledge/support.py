"""What the knowledge tests share: the API routes of agent ``bot``, and writing a graph through the
service."""

from __future__ import annotations

from typing import Any

from apps.knowledge import services
from apps.knowledge.models import Entity
from apps.knowledge.validation import parse_entity, parse_relation
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant

GRAPH = "/api/v1/agents/bot/knowledge/"
ENTITIES = GRAPH + "entities/"
RELATIONS = GRAPH + "relations/"
UPSERT = GRAPH + "upsert"
SEARCH = GRAPH + "search"
EXECUTE = "/api/v1/runtime/execute"


def upsert(
    tenant: Tenant,
    agent: Agent,
    entities: list[dict[str, Any]],
    relations: list[dict[str, Any]] | None = None,
    user_id: str = "",
) -> dict[tuple[str, str], Entity]:
    """Write a graph through the service; returns its entities by (type, name)."""
    result = services.graph_upsert(
        actor=Actor.system(tenant),
        agent=agent,
        user_id=user_id,
        entities=[parse_entity(item) for item in entities],
        relations=[parse_relation(item) for item in relations or []],
    )
    return {(entity.entity_type, entity.name): entity for entity, _ in result.entities}


def ref(entity_type: str, name: str) -> dict[str, str]:
    return {"type": entity_type, "name": name}


def relation(
    source: dict[str, str], relation_type: str, target: dict[str, str], **extra: Any
) -> dict[str, Any]:
    return {"source": source, "type": relation_type, "target": target, **extra}
