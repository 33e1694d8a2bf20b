"""The memory_search tool: hybrid search over the calling agent's memory documents (apps.memory.search).

``scope`` is ``all`` by default: the caller's own documents and the agent's global ones (a call without
a user sees the global ones only); a team member searches its team lead's memory too, as it reads it.
The answer lists path, heading, scores and a snippet per hit, for a model to read and then open the
document with memory_get or read_file; ``data`` holds the same hits, structured, with the mode
(``hybrid`` or ``fts``).
"""

from __future__ import annotations

from typing import Any

from apps.memory import selectors
from apps.memory.search import DEFAULT_LIMIT, MemorySearchResult, SearchError, hybrid_search
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult


def _describe(result: MemorySearchResult) -> str:
    if result.mode == "hybrid":
        return f"hybrid: full text + vectors of {result.embedder}"
    return "full text only: no embedding model" + (" (unavailable)" if result.warning else " is configured")


def render(result: MemorySearchResult) -> str:
    """The answer a model reads."""
    header = f'Memory search for "{result.query}" (scope {result.scope}; {_describe(result)})'
    lines: list[str] = []
    if result.warning:
        lines.append(f"Note: {result.warning}.")
    if not result.hits:
        lines.insert(0, f"{header}: no matches.")
        lines.append(
            "Try other words or a broader scope. Memory documents are MEMORY.md and memory/*.md; "
            "write one with write_file to remember something."
        )
        return "\n".join(lines)
    lines.insert(0, f"{header}: {len(result.hits)} result{'s' if len(result.hits) != 1 else ''}.")
    for number, hit in enumerate(result.hits, 1):
        where = f"{hit.path} > {hit.heading}" if hit.heading else hit.path
        scores = f"score {hit.score:.2f}"
        if result.mode == "hybrid":
            scores += f"; text {hit.text_score:.2f}, vector {hit.vector_score:.2f}"
        owner = ", your own" if hit.scope == "user" else ""
        owner += ", the team lead's" if hit.team_lead else ""
        lines.append(f"\n{number}. {where} ({scores}{owner})\n   {hit.snippet}")
    return "\n".join(lines)


@tool("memory_search")
def memory_search(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """Search the agent's memory (the caller's documents and the global ones) by words and meaning."""
    scope = args.get("scope")
    limit = args.get("limit")
    try:
        result = hybrid_search(
            ctx.tenant,
            ctx.agent,
            args.get("query"),  # type: ignore[arg-type]  # validated by hybrid_search
            user_id=ctx.user_id,
            scope=scope if scope is not None else "all",
            limit=limit if limit is not None else DEFAULT_LIMIT,
            lead=selectors.team_lead_of(tenant=ctx.tenant, agent=ctx.agent),
        )
    except SearchError as exc:
        return ToolResult.error(f"memory_search: {exc}.")
    return ToolResult.ok(render(result), **result.as_dict())
