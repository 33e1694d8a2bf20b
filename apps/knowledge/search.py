"""Search over an agent's knowledge graph: what knowledge_graph_search and the search API answer.

Which entities match ``query`` (in the agent's graph, for one tenant; a call with a user sees that
user's graph and the shared one, a call without one the shared one only), best first:

1. **exact**: the whole query is an entity's name (score 3) or one of its aliases (2.9), compared
   case-folded with whitespace collapsed;
2. **full text**: ``websearch_to_tsquery('simple', query)`` (quoted phrases, ``or``, ``-word``; no
   stemming, so names stay as written) against names and aliases (weight A), types (B) and
   descriptions (C), scored 1 + the ``ts_rank`` divided by the best rank of the query (1-2);
3. **relation type**: entities at either end of a relation whose type matches the query ("works at",
   "works_at"), scored 1.25;
4. **prefix**: when fewer than ``limit`` entities were found, names, words of names and aliases that
   start with the query (``ILIKE 'query%'``; a short query like "ac" finds "Acme"), scored 0.5.

Each hit carries its relations one hop out, both directions, at most ``RELATIONS_PER_ENTITY`` per
direction (strongest weight first), and with ``depth=2`` the relations of those neighbours too (at most
``SECOND_HOP_PER_ENTITY`` each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, Q, QuerySet, TextField
from django.db.models.functions import Cast

from apps.knowledge.models import Entity, Relation
from apps.knowledge.selectors import bounded_relations
from apps.knowledge.validation import clean_type, name_key
from apps.tenants.errors import ServiceError

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

MAX_QUERY_CHARS = 500
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
RELATIONS_PER_ENTITY = 20
SECOND_HOP_PER_ENTITY = 5
RELATION_MATCHES = 500  # relations whose type matches, at most, whose endpoints are hits
PREFIX_MAX_CHARS = 64

EXACT_NAME = 3.0
EXACT_ALIAS = 2.9
RELATION_SCORE = 1.25
PREFIX_SCORE = 0.5

Match = Literal["name", "alias", "text", "relation", "prefix"]


class SearchError(ValueError):
    """The query or its options are invalid; the message says what to change."""


@dataclass(frozen=True)
class Link:
    """A relation seen from one entity: ``direction`` "out" (the entity is its source) or "in"."""

    relation: Relation
    direction: Literal["out", "in"]
    next: list[Link] = field(default_factory=list)  # depth 2: the other entity's relations
    next_more: int = 0  # how many of those were left out

    @property
    def other(self) -> Entity:
        return self.relation.target if self.direction == "out" else self.relation.source

    def as_dict(self) -> dict[str, Any]:
        other = self.other
        data: dict[str, Any] = {
            "id": str(self.relation.pk),
            "direction": self.direction,
            "type": self.relation.relation_type,
            "entity": {"id": str(other.pk), "type": other.entity_type, "name": other.name},
            "weight": self.relation.weight,
        }
        if self.relation.properties:
            data["properties"] = self.relation.properties
        if self.next or self.next_more:
            data["relations"] = [link.as_dict() for link in self.next]
            data["more_relations"] = self.next_more
        return data


@dataclass
class Hit:
    entity: Entity
    match: Match
    score: float
    links: list[Link] = field(default_factory=list)
    more_links: int = 0  # relations left out by the bound

    def as_dict(self) -> dict[str, Any]:
        entity = self.entity
        return {
            "id": str(entity.pk),
            "type": entity.entity_type,
            "name": entity.name,
            "aliases": entity.aliases,
            "description": entity.description,
            "properties": entity.properties,
            "user_id": entity.user_id,
            "match": self.match,
            "score": round(self.score, 4),
            "relations": [link.as_dict() for link in self.links],
            "more_relations": self.more_links,
        }


@dataclass
class KnowledgeSearchResult:
    query: str
    entity_type: str | None
    depth: int
    in_scope: int  # entities the search could see (0: the graph is empty for this call)
    hits: list[Hit]

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "type": self.entity_type,
            "depth": self.depth,
            "entities_in_scope": self.in_scope,
            "hits": [hit.as_dict() for hit in self.hits],
        }


def validate(query: Any, *, entity_type: Any, limit: Any, depth: Any) -> tuple[str, str | None, int, int]:
    """The cleaned query, type, limit and depth; SearchError with a message for a model or a person."""
    if not isinstance(query, str) or not query.strip():
        raise SearchError("query is required: a name, a type, a relation or words of a description")
    query = " ".join(query.split())
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"query is longer than {MAX_QUERY_CHARS} characters; shorten it")
    if entity_type is not None:
        try:
            entity_type = clean_type(entity_type, "entity_type")
        except ServiceError as exc:
            raise SearchError(exc.message) from None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SearchError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    if isinstance(depth, bool) or depth not in (1, 2):
        raise SearchError("depth must be 1 (an entity's relations) or 2 (and its neighbours' relations)")
    return query, entity_type, limit, depth


def _scopes(user_id: str) -> list[str]:
    return [user_id, ""] if user_id else [""]


def _in_scope(tenant: Tenant, agent: Agent, user_id: str, entity_type: str | None) -> QuerySet[Entity]:
    queryset = Entity.objects.for_tenant(tenant).filter(agent_id=agent.pk, user_id__in=_scopes(user_id))
    if entity_type:
        queryset = queryset.filter(entity_type=entity_type)
    return queryset.defer("search_vector")


def _candidates(
    tenant: Tenant, agent: Agent, entities: QuerySet[Entity], query: str, user_id: str, limit: int
) -> dict[Any, Hit]:
    found: dict[Any, Hit] = {}

    def add(entity: Entity, match: Match, score: float) -> None:
        current = found.get(entity.pk)
        if current is None or score > current.score:
            found[entity.pk] = Hit(entity, match, score)

    key = name_key(query)
    for entity in entities.filter(Q(name_key=key) | Q(alias_keys__contains=[key]))[: limit * 2]:
        if entity.name_key == key:
            add(entity, "name", EXACT_NAME)
        else:
            add(entity, "alias", EXACT_ALIAS)

    tsquery = SearchQuery(query, search_type="websearch", config="simple")
    ranked = list(
        entities.filter(search_vector=tsquery)
        .annotate(rank=SearchRank(F("search_vector"), tsquery))
        .order_by("-rank", "name_key", "id")[: limit * 2]
    )
    best = max((float(row.rank) for row in ranked), default=0.0) or 1.0  # type: ignore[attr-defined]
    for entity in ranked:
        add(entity, "text", 1.0 + float(entity.rank) / best)  # type: ignore[attr-defined]

    matching = (
        Relation.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, user_id__in=_scopes(user_id), search_vector=tsquery)
        .values_list("source_id", "target_id")[:RELATION_MATCHES]
    )
    ends = {pk for pair in matching for pk in pair} - set(found)
    if ends:
        for entity in entities.filter(pk__in=ends).order_by("name_key", "id")[: limit * 2]:
            add(entity, "relation", RELATION_SCORE)

    if len(found) < limit and len(key) <= PREFIX_MAX_CHARS:
        prefixed = (
            entities.annotate(aliases_text=Cast("aliases", TextField()))
            .filter(
                Q(name_key__startswith=key)
                | Q(name_key__contains=" " + key)
                | Q(aliases_text__icontains='"' + query)
            )
            .exclude(pk__in=list(found))
            .order_by("name_key", "id")[:limit]
        )
        for entity in prefixed:
            add(entity, "prefix", PREFIX_SCORE)
    return found


def _links(
    tenant: Tenant, agent: Agent, ids: list[Any], user_id: str, per_side: int
) -> dict[Any, tuple[list[Link], int]]:
    """Each entity's links (out, then in; each side bounded) and how many were left out."""
    outgoing, incoming = bounded_relations(
        tenant=tenant, agent=agent, ids=ids, limit=per_side, user_ids=_scopes(user_id)
    )
    answer: dict[Any, tuple[list[Link], int]] = {}
    for pk in ids:
        out, into = outgoing.get(pk), incoming.get(pk)
        links = [Link(row, "out") for row in (out.relations if out else [])]
        links += [Link(row, "in") for row in (into.relations if into else [])]
        total = (out.total if out else 0) + (into.total if into else 0)
        answer[pk] = (links, total - len(links))
    return answer


def knowledge_search(
    tenant: Tenant,
    agent: Agent,
    query: Any,
    *,
    user_id: str = "",
    entity_type: Any = None,
    limit: Any = DEFAULT_LIMIT,
    depth: Any = 1,
) -> KnowledgeSearchResult:
    """Search ``agent``'s graph in ``tenant`` as the module docstring says. Raises SearchError for an
    invalid query, type, limit or depth."""
    query, entity_type, limit, depth = validate(query, entity_type=entity_type, limit=limit, depth=depth)
    entities = _in_scope(tenant, agent, user_id, entity_type)
    in_scope = entities.count()
    if not in_scope:
        return KnowledgeSearchResult(query, entity_type, depth, 0, [])
    found = _candidates(tenant, agent, entities, query, user_id, limit)
    hits = sorted(found.values(), key=lambda hit: (-hit.score, hit.entity.user_id == "", hit.entity.name_key))
    hits = hits[:limit]
    if hits:
        links = _links(tenant, agent, [hit.entity.pk for hit in hits], user_id, RELATIONS_PER_ENTITY)
        for hit in hits:
            hit.links, hit.more_links = links[hit.entity.pk]
        if depth == 2:
            _second_hop(tenant, agent, hits, user_id)
    return KnowledgeSearchResult(query, entity_type, depth, in_scope, hits)


def _second_hop(tenant: Tenant, agent: Agent, hits: list[Hit], user_id: str) -> None:
    """Give each link of each hit the other entity's own relations (without those leading back to the
    hit), at most ``SECOND_HOP_PER_ENTITY``."""
    neighbours = list({link.other.pk for hit in hits for link in hit.links})
    if not neighbours:
        return
    further = _links(tenant, agent, neighbours, user_id, SECOND_HOP_PER_ENTITY)
    for hit in hits:
        replaced: list[Link] = []
        for link in hit.links:
            fetched, left_out = further[link.other.pk]
            onward = [step for step in fetched if step.other.pk != hit.entity.pk]
            kept = onward[:SECOND_HOP_PER_ENTITY]
            replaced.append(Link(link.relation, link.direction, kept, left_out + len(onward) - len(kept)))
        hit.links = replaced
