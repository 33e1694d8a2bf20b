"""The memory tools: ``memory_get`` and ``memory_search``.

``memory_get`` gives one memory document as read_file would find it (same scopes: the call's user, the
agent's global memory, a team member's lead), whole, with where it came from and its index status.

``memory_search`` is a hybrid search over the calling agent's memory documents (apps.memory.search).
``scope`` is ``all`` by default: the caller's own documents and the agent's global ones (a call without
a user sees the global ones only); a team member searches its team lead's memory too, as it reads it.
The answer lists path, heading, scores and a snippet per hit, for a model to read and then open the
document with memory_get or read_file; ``data`` holds the same hits, structured, with the mode
(``hybrid`` or ``fts``).
"""

from __future__ import annotations

from typing import Any

from apps.memory import selectors
from apps.memory.interceptor import LEAD_SOURCE_NOTE, SOURCE_NOTE, not_found, scopes_for
from apps.memory.search import DEFAULT_LIMIT, MemorySearchResult, SearchError, hybrid_search
from apps.toolkit import vfs
from apps.toolkit.context import CallContext
from apps.toolkit.registry import tool
from apps.toolkit.results import ToolResult

MAX_OUTPUT_CHARS = 250_000  # read_file's cap: longer documents are read on with read_file's offset


@tool("memory_get")
def memory_get(ctx: CallContext, args: dict[str, Any]) -> ToolResult:
    """The document at ``path`` (MEMORY.md, memory.md or memory/<name>)."""
    raw = args.get("path")
    if not isinstance(raw, str) or not raw:
        return ToolResult.error("missing required argument 'path' (e.g. MEMORY.md or memory/notes.md).")
    path = vfs.logical_path(ctx, raw)
    if path is None or not selectors.is_memory_path(path):
        return ToolResult.error(
            f"{raw} is not a memory file. memory_get reads MEMORY.md, memory.md and memory/<name>; "
            "use read_file for other files."
        )
    found = selectors.document_for_read(tenant=ctx.tenant, scopes=scopes_for(ctx), path=path)
    if found is None:
        return ToolResult.ok(not_found(path), path=path, exists=False)
    document, scope = found
    content = document.content
    truncated = len(content) > MAX_OUTPUT_CHARS
    if truncated:
        content = (
            content[:MAX_OUTPUT_CHARS]
            + f"\n\n[{path}: showing the first {MAX_OUTPUT_CHARS} of {len(document.content)} characters; "
            "read the rest with read_file and an offset]"
        )
    status = document.index_status
    if status == "failed":
        status = f"failed ({document.index_error})"
    elif status == "skipped":
        status = "not indexed (only Markdown files are indexed)"
    text = f"{content}\n\n{LEAD_SOURCE_NOTE if scope.lead else SOURCE_NOTE}\n[Index status: {status}]"
    return ToolResult.ok(
        text,
        path=path,
        exists=True,
        user_id=document.user_id,
        team_lead=scope.lead,
        size=len(document.content),
        index_status=document.index_status,
        indexed_at=document.indexed_at.isoformat() if document.indexed_at else None,
        truncated=truncated,
    )


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
