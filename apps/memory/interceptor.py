"""The memory interceptor (SPEC B §8): ``MEMORY.md``, ``memory.md`` and ``memory/…`` are documents in
the database, never files on disk.

Reads take the call's user's document, then the agent's global one, then, for a team member, the team
lead's (user, then global). A file nobody wrote yet is a quiet "does not exist yet", not an error.
Writes go to the call's user's document ("" when the call names no user); a team member's are refused:
the lead keeps the team's memory.
"""

from __future__ import annotations

from apps.memory import selectors, services
from apps.memory.selectors import Scope
from apps.tenants.errors import ServiceError
from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult
from apps.toolkit.vfs import Loaded, VirtualEntry

SOURCE_NOTE = "[Source: database, not filesystem]"
LEAD_SOURCE_NOTE = "[Source: database, not filesystem; the team lead's memory, read-only for you]"
MEMBER_WRITE_REFUSED = "memory is read-only for team members — only the team leader can save memory files"


def not_found(path: str) -> str:
    return (
        f"(memory file {path} does not exist yet; nothing has been saved there. "
        "Write it with write_file when there is something worth remembering.)"
    )


def scopes_for(ctx: CallContext) -> list[Scope]:
    lead = selectors.team_lead_of(tenant=ctx.tenant, agent=ctx.agent)
    return selectors.read_scopes(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id, lead=lead)


class MemoryInterceptor:
    name = "memory"

    def handles(self, ctx: CallContext, path: str) -> bool:
        return selectors.is_memory_path(path)

    def load(self, ctx: CallContext, path: str) -> Loaded | ToolResult:
        found = selectors.document_for_read(tenant=ctx.tenant, scopes=scopes_for(ctx), path=path)
        if found is None:
            return ToolResult.ok(not_found(path), path=path, exists=False)
        document, scope = found
        return Loaded(document.content, note=LEAD_SOURCE_NOTE if scope.lead else SOURCE_NOTE)

    def store(self, ctx: CallContext, path: str, content: str, *, append: bool) -> ToolResult:
        if selectors.team_lead_of(tenant=ctx.tenant, agent=ctx.agent) is not None:
            return ToolResult.error(MEMBER_WRITE_REFUSED)
        try:
            document, created = services.document_write(
                actor=ctx.actor,
                agent=ctx.agent,
                user_id=ctx.user_id,
                path=path,
                content=content,
                append=append,
            )
        except ServiceError as error:
            return ToolResult.error(error.message)
        size = len(document.content)
        verb = "Appended to" if append and not created else "Saved"
        scope = f"user {ctx.user_id}'s memory" if ctx.user_id else "the agent's global memory"
        indexing = " It is being indexed for memory_search." if document.index_status == "pending" else ""
        return ToolResult.ok(
            f"{verb} memory file {path} in {scope} ({size} characters; stored in the database, not on "
            f"disk).{indexing}",
            path=path,
            user_id=ctx.user_id,
            size=size,
            created=created,
            index_status=document.index_status,
        )

    def entries(self, ctx: CallContext) -> list[VirtualEntry]:
        return [
            VirtualEntry(row.path, row.size, "team lead's memory" if row.scope.lead else "memory")
            for row in selectors.visible_documents(tenant=ctx.tenant, scopes=scopes_for(ctx))
        ]


INTERCEPTOR = MemoryInterceptor()
