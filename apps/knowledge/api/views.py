"""The knowledge API: an agent's knowledge graph (every user's entities and relations, and the shared
ones).

Viewers read and search; administrators write. Every route resolves the agent in the caller's tenant
first, so another tenant's agent is 404 whatever the method. Writes go through
``apps.knowledge.services`` (audited, published on the ``knowledge`` topic).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.knowledge import selectors, services
from apps.knowledge.access import access_entity, access_relation
from apps.knowledge.api import serializers as s
from apps.knowledge.models import Entity, Relation
from apps.knowledge.search import SearchError, knowledge_search
from apps.knowledge.validation import (
    MAX_BULK_ENTITIES,
    MAX_BULK_RELATIONS,
    clean_type,
    clean_user_id,
    invalid,
    parse_entity,
    parse_list,
    parse_relation,
)
from apps.tenants.access import access_agent
from apps.tenants.api.base import TenantScopedViewSet
from apps.tenants.errors import ErrorCode, ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role

DETAIL_RELATIONS = 200
PATCH_FIELDS = {"type", "name", "description", "properties", "aliases"}


def _ref(entity: Entity) -> dict[str, Any]:
    return {"id": entity.pk, "type": entity.entity_type, "name": entity.name}


def entity_fields(entity: Entity) -> dict[str, Any]:
    return {
        "id": entity.pk,
        "type": entity.entity_type,
        "name": entity.name,
        "aliases": entity.aliases,
        "description": entity.description,
        "properties": entity.properties,
        "user_id": entity.user_id,
        "source": entity.source,
        "updated_by": entity.updated_by,
        "created_at": entity.created_at,
        "updated_at": entity.updated_at,
    }


def relation_fields(relation: Relation) -> dict[str, Any]:
    return {
        "id": relation.pk,
        "type": relation.relation_type,
        "source": _ref(relation.source),
        "target": _ref(relation.target),
        "properties": relation.properties,
        "weight": relation.weight,
        "user_id": relation.user_id,
        "origin": relation.origin,
        "updated_by": relation.updated_by,
        "created_at": relation.created_at,
        "updated_at": relation.updated_at,
    }


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise invalid("body", "must be a JSON object.")
    return dict(request.data)


class AgentGraphViewSet(TenantScopedViewSet):
    """Resolves the agent of ``<key>`` in the caller's tenant before any method runs."""

    read_role = Role.VIEWER
    write_role = Role.ADMIN
    agent: Agent

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.agent = access_agent(actor=self.actor, key=kwargs["key"])

    def scope_queryset(self, queryset: Any) -> Any:
        if getattr(self, "agent", None) is None:
            return queryset.none()
        return queryset.filter(agent_id=self.agent.pk)


class EntityViewSet(AgentGraphViewSet):
    """``GET agents/<key>/knowledge/entities/``: the agent's entities by name (``?type=`` one type,
    ``?q=`` part of a name, alias or description, ``?user_id=`` one user's graph, ``""`` the shared
    one); paginated (``page``, ``page_size`` ≤ 200).

    ``POST``: upsert one entity (``type``, ``name``, optional ``description``, ``properties``,
    ``aliases``, ``user_id``): 201 when created, 200 when merged into the entity of the same type and
    name (description replaced, properties merged, aliases added).

    ``GET|PATCH|DELETE agents/<key>/knowledge/entities/<id>/``: one entity with its relations both
    ways; PATCH sets the given fields (properties and aliases replaced); DELETE removes it with its
    relations."""

    model = Entity
    serializer_class = s.EntityOutput

    @extend_schema(parameters=[s.EntityFilterInput], responses={200: s.EntityOutput(many=True)})
    def list(self, request: Request, key: str) -> Response:
        filters = s.EntityFilterInput(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        entity_type = clean_type(data["type"], "type") if data.get("type") else None
        rows = selectors.entity_list(
            tenant=self.actor.tenant,
            agent=self.agent,
            entity_type=entity_type,
            q=data.get("q", ""),
            user_id=data.get("user_id"),
        )
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(
            s.EntityOutput([entity_fields(e) for e in page or []], many=True).data
        )

    @extend_schema(
        request=s.EntityCreateBody, responses={200: s.EntityDetailOutput, 201: s.EntityDetailOutput}
    )
    def create(self, request: Request, key: str) -> Response:
        body = _body(request)
        item = parse_entity(body, extra=frozenset({"user_id"}))
        entity, created = services.entity_upsert(
            actor=self.actor, agent=self.agent, user_id=clean_user_id(body.get("user_id")), item=item
        )
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(self._detail(entity), status=answer)

    def _detail(self, entity: Entity) -> dict[str, Any]:
        outgoing, incoming = selectors.bounded_relations(
            tenant=self.actor.tenant, agent=self.agent, ids=[entity.pk], limit=DETAIL_RELATIONS
        )
        out, into = outgoing.get(entity.pk), incoming.get(entity.pk)
        data = {
            **entity_fields(entity),
            "outgoing": [relation_fields(r) for r in (out.relations if out else [])],
            "outgoing_total": out.total if out else 0,
            "incoming": [relation_fields(r) for r in (into.relations if into else [])],
            "incoming_total": into.total if into else 0,
        }
        return dict(s.EntityDetailOutput(data).data)

    @extend_schema(responses={200: s.EntityDetailOutput})
    def retrieve(self, request: Request, key: str, pk: str) -> Response:
        entity = access_entity(tenant=self.actor.tenant, agent=self.agent, id=pk)
        return Response(self._detail(entity))

    @extend_schema(request=s.EntityPatchBody, responses={200: s.EntityDetailOutput})
    def partial_update(self, request: Request, key: str, pk: str) -> Response:
        entity = access_entity(tenant=self.actor.tenant, agent=self.agent, id=pk)
        body = _body(request)
        unknown = sorted(set(body) - PATCH_FIELDS)
        if unknown:
            raise invalid(unknown[0], f"unknown field; the fields are {', '.join(sorted(PATCH_FIELDS))}.")
        if not body:
            raise invalid("body", f"give at least one of {', '.join(sorted(PATCH_FIELDS))}.")
        for name in sorted(body):
            if body[name] is None:
                raise invalid(name, "may not be null.")
        entity = services.entity_update(
            actor=self.actor,
            agent=self.agent,
            entity=entity,
            name=body.get("name"),
            entity_type=body.get("type"),
            description=body.get("description"),
            properties=body.get("properties"),
            aliases=body.get("aliases"),
        )
        return Response(self._detail(entity))

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, key: str, pk: str) -> Response:
        entity = access_entity(tenant=self.actor.tenant, agent=self.agent, id=pk)
        services.entity_delete(actor=self.actor, agent=self.agent, entity=entity)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RelationViewSet(AgentGraphViewSet):
    """``GET agents/<key>/knowledge/relations/``: the agent's relations (``?type=`` one type,
    ``?entity=`` those from or to one entity, ``?user_id=`` one user's graph); paginated.

    ``POST``: upsert one relation, its endpoints named by type and name (``source``, ``target``: the
    ``user_id``'s entity first, then the shared one); a missing endpoint is 400 naming it, unless
    ``create_missing`` is true. 201 when created, 200 when it existed (properties merged, a given weight
    replaces the old one).

    ``GET|DELETE agents/<key>/knowledge/relations/<id>/``: one relation."""

    model = Relation
    serializer_class = s.RelationOutput

    @extend_schema(parameters=[s.RelationFilterInput], responses={200: s.RelationOutput(many=True)})
    def list(self, request: Request, key: str) -> Response:
        filters = s.RelationFilterInput(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        entity = None
        if data.get("entity"):
            entity = access_entity(tenant=self.actor.tenant, agent=self.agent, id=data["entity"])
        rows = selectors.relation_list(
            tenant=self.actor.tenant,
            agent=self.agent,
            relation_type=clean_type(data["type"], "type") if data.get("type") else None,
            user_id=data.get("user_id"),
            entity=entity,
        )
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(
            s.RelationOutput([relation_fields(r) for r in page or []], many=True).data
        )

    @extend_schema(request=s.RelationCreateBody, responses={200: s.RelationOutput, 201: s.RelationOutput})
    def create(self, request: Request, key: str) -> Response:
        body = _body(request)
        item = parse_relation(body, extra=frozenset({"user_id", "create_missing"}))
        create_missing = body.get("create_missing", False)
        if not isinstance(create_missing, bool):
            raise invalid("create_missing", "true or false.")
        relation, created = services.relation_upsert(
            actor=self.actor,
            agent=self.agent,
            user_id=clean_user_id(body.get("user_id")),
            item=item,
            create_missing=create_missing,
        )
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(s.RelationOutput(relation_fields(relation)).data, status=answer)

    @extend_schema(responses={200: s.RelationOutput})
    def retrieve(self, request: Request, key: str, pk: str) -> Response:
        relation = access_relation(tenant=self.actor.tenant, agent=self.agent, id=pk)
        return Response(s.RelationOutput(relation_fields(relation)).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, key: str, pk: str) -> Response:
        relation = access_relation(tenant=self.actor.tenant, agent=self.agent, id=pk)
        services.relation_delete(actor=self.actor, agent=self.agent, relation=relation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GraphViewSet(AgentGraphViewSet):
    """``POST agents/<key>/knowledge/upsert`` (administrators): entities and relations in one
    transaction (at most 500 entities and 1000 relations): all written, or none with the error naming
    the item (``relations[4].target``). A relation may name an entity of the same payload.

    ``POST agents/<key>/knowledge/search`` (viewers): what knowledge_graph_search answers, as JSON."""

    model = Entity
    action_roles = {"upsert": Role.ADMIN, "search": Role.VIEWER}

    @extend_schema(request=s.KnowledgeUpsertBody, responses={200: s.KnowledgeUpsertOutput})
    def upsert(self, request: Request, key: str) -> Response:
        body = _body(request)
        unknown = sorted(set(body) - {"user_id", "entities", "relations"})
        if unknown:
            raise invalid(unknown[0], "unknown field; the fields are entities, relations and user_id.")
        entity_items = parse_list(body.get("entities"), "entities", MAX_BULK_ENTITIES)
        relation_items = parse_list(body.get("relations"), "relations", MAX_BULK_RELATIONS)
        if not entity_items and not relation_items:
            raise invalid("entities", "give entities, relations or both.")
        result = services.graph_upsert(
            actor=self.actor,
            agent=self.agent,
            user_id=clean_user_id(body.get("user_id")),
            entities=[parse_entity(item, f"entities[{i}]") for i, item in enumerate(entity_items)],
            relations=[parse_relation(item, f"relations[{i}]") for i, item in enumerate(relation_items)],
        )
        data = {
            **result.counts(),
            "entities": [{**_ref(entity), "created": created} for entity, created in result.entities],
            "relations": [
                {
                    "id": relation.pk,
                    "type": relation.relation_type,
                    "source": _ref(relation.source),
                    "target": _ref(relation.target),
                    "created": created,
                }
                for relation, created in result.relations
            ],
        }
        return Response(s.KnowledgeUpsertOutput(data).data)

    @extend_schema(request=s.KnowledgeSearchInput, responses={200: s.KnowledgeSearchOutput})
    def search(self, request: Request, key: str) -> Response:
        body = s.KnowledgeSearchInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            result = knowledge_search(
                self.actor.tenant,
                self.agent,
                data["query"],
                user_id=clean_user_id(data["user_id"]),
                entity_type=data.get("entity_type"),
                limit=data["limit"],
                depth=data["depth"],
            )
        except SearchError as exc:
            raise ServiceError(ErrorCode.INVALID, str(exc)) from None
        return Response(result.as_dict())
