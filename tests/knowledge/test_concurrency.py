"""Concurrent writes of one agent's graph on PostgreSQL: upserts racing to create the same entity and
relation all land in one row each, merged (the graph's writes are serialised per agent)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections

from apps.accounts import services as tenant_services
from apps.knowledge import services
from apps.knowledge.models import Entity, Relation
from apps.knowledge.validation import parse_entity, parse_relation
from apps.tenants.actors import Actor

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 6


def run_concurrently(write: Callable[[int], object]) -> None:
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            write(index)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors


def test_racing_upserts_of_one_entity_merge_into_one_row(tenant_a):
    agent = tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")

    def write(index: int) -> None:
        item = parse_entity(
            {
                "type": "person",
                "name": "Ada Lovelace",
                "aliases": [f"A{index}"],
                "properties": {f"k{index}": index},
            }
        )
        services.entity_upsert(actor=Actor.system(tenant_a), agent=agent, user_id="", item=item)

    run_concurrently(write)
    entity = Entity.objects.for_tenant(tenant_a).get()
    assert sorted(entity.aliases) == sorted(f"A{index}" for index in range(WRITERS))
    assert entity.properties == {f"k{index}": index for index in range(WRITERS)}


def test_racing_bulk_upserts_create_each_entity_and_relation_once(tenant_a):
    agent = tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")

    def write(index: int) -> None:
        services.graph_upsert(
            actor=Actor.system(tenant_a),
            agent=agent,
            user_id="",
            entities=[
                parse_entity({"type": "person", "name": "Ada"}),
                parse_entity({"type": "organization", "name": "Acme"}),
                parse_entity({"type": "person", "name": f"Writer {index}"}),
            ],
            relations=[
                parse_relation(
                    {
                        "source": {"type": "person", "name": "Ada"},
                        "type": "works_at",
                        "target": {"type": "organization", "name": "Acme"},
                        "properties": {f"seen_by_{index}": True},
                    }
                ),
                parse_relation(
                    {
                        "source": {"type": "person", "name": f"Writer {index}"},
                        "type": "knows",
                        "target": {"type": "person", "name": "Ada"},
                    }
                ),
            ],
        )

    run_concurrently(write)
    assert Entity.objects.for_tenant(tenant_a).count() == 2 + WRITERS
    works = Relation.objects.for_tenant(tenant_a).get(relation_type="works_at")
    assert works.properties == {f"seen_by_{index}": True for index in range(WRITERS)}
    assert Relation.objects.for_tenant(tenant_a).filter(relation_type="knows").count() == WRITERS
