"""Tenant-isolation cases for the knowledge routes (merged into ``test_tenant_isolation.CASES``)."""

from __future__ import annotations

from collections.abc import Callable

from apps.accounts import services as tenant_services
from apps.knowledge import services
from apps.knowledge.validation import parse_entity, parse_relation
from apps.tenants.actors import Actor
from apps.tenants.models import Tenant
from tests.api.isolation_support import Case


def make_graph(tenant: Tenant, prefix: str = "secret") -> dict[str, str]:
    """An agent of ``tenant`` with a shared graph (a person who works at an organisation) and a person
    in user alice's graph; returns the agent's key and the ids of the person and of the relation."""
    system = Actor.system(tenant)
    agent = tenant_services.agent_create(actor=system, key=f"{prefix}-knowledge-agent", name="Agent")
    result = services.graph_upsert(
        actor=system,
        agent=agent,
        user_id="",
        entities=[
            parse_entity({"type": "person", "name": f"{prefix} Person", "description": "a secret person"}),
            parse_entity({"type": "organization", "name": f"{prefix} Org"}),
        ],
        relations=[
            parse_relation(
                {
                    "source": {"type": "person", "name": f"{prefix} Person"},
                    "type": "works_at",
                    "target": {"type": "organization", "name": f"{prefix} Org"},
                }
            )
        ],
    )
    services.entity_upsert(
        actor=system, agent=agent, user_id="alice", item=parse_entity({"type": "person", "name": "Alice"})
    )
    person = result.entities[0][0]
    relation = result.relations[0][0]
    return {"key": agent.key, "entity": str(person.pk), "relation": str(relation.pk)}


def _kwargs(**names: str) -> Callable[[Tenant], dict[str, str]]:
    """A ``Case.make`` that builds the graph and returns URL kwargs: ``kwarg=name in make_graph``."""

    def make(tenant: Tenant) -> dict[str, str]:
        made = make_graph(tenant)
        return {kwarg: made[name] for kwarg, name in names.items()}

    return make


ENTITY = {"type": "person", "name": "Mallory"}
RELATION = {
    "source": {"type": "person", "name": "secret Person"},
    "type": "knows",
    "target": {"type": "person", "name": "Mallory"},
    "create_missing": True,
}

CASES: dict[str, Case] = {
    "knowledge-entity-list": Case(make=_kwargs(key="key"), writes=[("post", ENTITY)]),
    "knowledge-entity-detail": Case(
        make=_kwargs(key="key", pk="entity"),
        writes=[("patch", {"name": "hijacked"}), ("delete", None)],
    ),
    "knowledge-relation-list": Case(make=_kwargs(key="key"), writes=[("post", RELATION)]),
    "knowledge-relation-detail": Case(make=_kwargs(key="key", pk="relation"), writes=[("delete", None)]),
    "knowledge-upsert": Case(make=_kwargs(key="key"), writes=[("post", {"entities": [ENTITY]})]),
    "knowledge-search": Case(make=_kwargs(key="key"), writes=[("post", {"query": "secret"})]),
}
