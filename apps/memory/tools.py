"""The memory_get tool: one memory document as read_file would find it (same scopes: the call's user,
the agent's global memory, a team member's lead), whole, with where it came from and its index status."""

from __future__ import annotations

from typing import Any

from apps.memory import selectors
from apps.memory.interceptor import LEAD_SOURCE_NOTE, SOURCE_NOTE, not_found, scopes_for
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
