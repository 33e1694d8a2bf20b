"""Role cases for the knowledge routes (merged into ``test_roles``). URL templates may use the targets of
``test_roles._targets`` and of ``targets`` here."""

from __future__ import annotations

from typing import Any

from apps.tenants.models import Tenant
from apps.tenants.roles import Role
from tests.api.isolation_knowledge import make_graph

GRAPH = "/api/v1/agents/{knowledge_agent}/knowledge/"
ENTITIES = GRAPH + "entities/"
ENTITY = ENTITIES + "{knowledge_entity}/"
RELATIONS = GRAPH + "relations/"
RELATION = RELATIONS + "{knowledge_relation}/"
PERSON = {"type": "person", "name": "roles Person"}
ORG = {"type": "organization", "name": "roles Org"}

# (method, url template, body, least role, success status)
ACTIONS: list[tuple[str, str, dict[str, Any] | None, str, int]] = [
    ("get", ENTITIES, None, Role.VIEWER, 200),
    ("get", ENTITIES + "?type=person&q=roles&user_id=", None, Role.VIEWER, 200),
    ("post", ENTITIES, {"type": "concept", "name": "Graphs"}, Role.ADMIN, 201),
    ("post", ENTITIES, {**PERSON, "description": "merged"}, Role.ADMIN, 200),
    ("get", ENTITY, None, Role.VIEWER, 200),
    ("patch", ENTITY, {"description": "changed"}, Role.ADMIN, 200),
    ("delete", ENTITY, None, Role.ADMIN, 204),
    ("get", RELATIONS, None, Role.VIEWER, 200),
    ("get", RELATIONS + "?type=works_at&entity={knowledge_entity}", None, Role.VIEWER, 200),
    ("post", RELATIONS, {"source": PERSON, "type": "founded", "target": ORG}, Role.ADMIN, 201),
    ("get", RELATION, None, Role.VIEWER, 200),
    ("delete", RELATION, None, Role.ADMIN, 204),
    ("post", GRAPH + "upsert", {"entities": [{"type": "project", "name": "Apollo"}]}, Role.ADMIN, 200),
    ("post", GRAPH + "search", {"query": "roles"}, Role.VIEWER, 200),
]


def targets(tenant: Tenant) -> dict[str, str]:
    """Objects of ``tenant`` that the templates above name (created fresh for each test)."""
    made = make_graph(tenant, "roles")
    return {
        "knowledge_agent": made["key"],
        "knowledge_entity": made["entity"],
        "knowledge_relation": made["relation"],
    }
