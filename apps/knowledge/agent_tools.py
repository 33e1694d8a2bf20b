"""The knowledge_graph_search tool: entities of the calling agent's knowledge graph that match a query,
each with its relations (apps.knowledge.search). The call's user sees their own graph and the shared
one; a call without a user sees the shared one. ``data`` holds the same hits, structured."""

from __future__ import annotations

import json
from typing import Any

from apps.knowledge.search import (
    DEFAULT_LIMIT,
    Hit,
    KnowledgeSearchResult,
    Link,
    SearchError,
    knowledge_search,
)
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult

DESCRIPTION_CHARS = 500
PROPERTIES_CHARS = 300
MAX_OUTPUT_CHARS = 40_000
MATCHES = {
    "name": "exact name",
    "alias": "exact alias",
    "text": "words",
    "relation": "relation type",
    "prefix": "name prefix",
}


def _label(name: str, entity_type: str) -> str:
    return f"{name} [{entity_type}]"


def _link_line(link: Link, origin: str) -> str:
    other = link.other
    target = _label(other.name, other.entity_type)
    weight = f" (weight {link.relation.weight:g})" if link.relation.weight is not None else ""
    if link.direction == "out":
        return f"{origin} --{link.relation.relation_type}--> {target}{weight}"
    return f"{target} --{link.relation.relation_type}--> {origin}{weight}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hit_lines(number: int, hit: Hit) -> list[str]:
    entity = hit.entity
    name = _label(entity.name, entity.entity_type)
    extra = [MATCHES[hit.match]]
    if entity.user_id:
        extra.append("your own")
    lines = [f"\n{number}. {name} (match: {', '.join(extra)})"]
    if entity.aliases:
        lines.append(f"   Also known as: {', '.join(entity.aliases)}")
    if entity.description:
        lines.append(f"   {_clip(' '.join(entity.description.split()), DESCRIPTION_CHARS)}")
    if entity.properties:
        properties = json.dumps(entity.properties, ensure_ascii=False, sort_keys=True)
        lines.append(f"   Properties: {_clip(properties, PROPERTIES_CHARS)}")
    if not hit.links:
        lines.append("   No relations.")
    for link in hit.links:
        lines.append(f"   - {_link_line(link, entity.name)}")
        for step in link.next:
            lines.append(f"       - {_link_line(step, link.other.name)}")
        if link.next_more:
            lines.append(f"       … and {link.next_more} more")
    if hit.more_links:
        lines.append(f"   … and {hit.more_links} more relations")
    return lines


def render(result: KnowledgeSearchResult, agent_key: str) -> str:
    """The answer a model reads."""
    kind = f" of type {result.entity_type}" if result.entity_type else ""
    if not result.in_scope:
        return (
            f"The knowledge graph of {agent_key} has no entities{kind} you can see: nothing has been "
            "recorded yet, so there is nothing to search."
        )
    header = f'Knowledge graph search for "{result.query}"{kind}'
    if not result.hits:
        return (
            f"{header}: no matches among {result.in_scope} entities. Try a name, an alias, a type "
            "(person, organization, …), a relation (works_at) or other words of a description."
        )
    count = len(result.hits)
    lines = [f"{header}: {count} entit{'ies' if count != 1 else 'y'} (of {result.in_scope})."]
    size = len(lines[0])
    for number, hit in enumerate(result.hits, 1):
        more = _hit_lines(number, hit)
        size += sum(len(line) + 1 for line in more)
        if number > 1 and size > MAX_OUTPUT_CHARS:
            lines.append(
                f"\n[{count - number + 1} more entities left out to keep this answer short: use a narrower "
                "query, a lower limit or depth 1]"
            )
            break
        lines.extend(more)
    return "\n".join(lines)


@tool("knowledge_graph_search")
def knowledge_graph_search(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Find entities of the agent's knowledge graph by name, alias, type, description or relation type,
    with their relations."""
    limit = args.get("limit")
    depth = args.get("depth")
    try:
        result = knowledge_search(
            ctx.tenant,
            ctx.agent,
            args.get("query"),
            user_id=ctx.user_id,
            entity_type=args.get("entity_type"),
            limit=limit if limit is not None else DEFAULT_LIMIT,
            depth=depth if depth is not None else 1,
        )
    except SearchError as exc:
        return ToolResult.error(f"knowledge_graph_search: {exc}.")
    return ToolResult.ok(render(result, ctx.agent.key), **result.as_dict())
