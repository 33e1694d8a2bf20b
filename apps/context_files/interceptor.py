"""The context-file interceptor: ``read_file``, ``write_file``, ``edit`` and ``list_files`` reach an
agent's context files in the database, never on disk (seed 000 §3, SPEC B §8).

A path is a context file when it is one of :data:`~apps.context_files.models.NAMES` at the workspace
root: ``SOUL.md``, ``./SOUL.md`` or ``<workspace>/SOUL.md`` (``notes/SOUL.md`` is an ordinary file).
Which copy a call reads or writes is :func:`apps.context_files.routing.route`'s decision; this module
turns it into answers an agent can act on, and writes through :mod:`apps.context_files.services`
(audited, published), as the call's actor.
"""

from __future__ import annotations

from apps.context_files import selectors, services
from apps.context_files.models import NAMES, AgentContextFile, UserContextFile
from apps.context_files.routing import BOOTSTRAP, Place, route
from apps.tenants.errors import ServiceError
from apps.toolkit import vfs
from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult

SOURCE = "context file"


def read_refusal(name: str) -> str:
    return (
        f"this file ({name}) is already loaded into your context. You don't need to read it again — "
        "refer to your system instructions instead. It is part of the agent's predefined configuration "
        "and cannot be modified through chat."
    )


def write_refusal(name: str) -> str:
    return (
        f"this file ({name}) is part of the agent's predefined configuration and cannot be modified "
        "through chat. Only an administrator of the agent can change it (dashboard or API)."
    )


def bootstrap_refusal() -> str:
    return (
        f"{BOOTSTRAP} holds this agent's first-run instructions and cannot be rewritten through chat. "
        f"When the first run is complete, write it with empty content: that deletes the user's copy."
    )


def user_needed(name: str) -> str:
    return (
        f"{name} is kept per user for this agent, and this call has no user id, so there is no copy to "
        "write. Call again with the user's id (user_id) to save it for that user."
    )


class ContextFileInterceptor:
    """Serves the seven context files of the call's agent (see the module docstring)."""

    name = "context_files"

    def handles(self, ctx: CallContext, path: str) -> bool:
        return path in NAMES

    def load(self, ctx: CallContext, path: str) -> vfs.Loaded | ToolResult:
        where = route(ctx.agent.type, path).read
        if where == Place.REFUSED:
            return ToolResult.error(read_refusal(path))
        if where == Place.USER and ctx.user_id:
            own = selectors.user_file(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id, name=path)
            if own is not None:
                return vfs.Loaded(own.content, note=f"[{path}: this user's own copy, stored by Toolgate]")
        if (
            path == BOOTSTRAP
            and ctx.user_id
            and selectors.bootstrap_completion(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id)
        ):
            return ToolResult.error(f"context file not found: {path}. This user's first run is complete.")
        shared = selectors.agent_file(tenant=ctx.tenant, agent=ctx.agent, name=path)
        if shared is None:
            writes = route(ctx.agent.type, path).write
            writable = writes == Place.AGENT or (writes == Place.USER and bool(ctx.user_id))
            hint = " It has no content yet; write_file creates it." if writable else ""
            return ToolResult.error(f"context file not found: {path}.{hint}")
        if where == Place.USER and ctx.user_id:
            note = f"[{path}: the agent's template; this user has no copy yet (writing it makes one)]"
        elif where == Place.USER:
            note = f"[{path}: the agent's text (no user id in this call)]"
        else:
            note = f"[{path}: shared by every user of this agent, stored by Toolgate]"
        return vfs.Loaded(shared.content, note=note)

    def store(self, ctx: CallContext, path: str, content: str, *, append: bool) -> ToolResult:
        where = route(ctx.agent.type, path).write
        if where == Place.REFUSED:
            return ToolResult.error(write_refusal(path))
        clearing = path == BOOTSTRAP and content == "" and not append
        if where == Place.CLEAR_ONLY and not clearing:
            return ToolResult.error(bootstrap_refusal())
        if where in (Place.USER, Place.CLEAR_ONLY) and not ctx.user_id:
            return ToolResult.error(user_needed(path))
        row: AgentContextFile | UserContextFile
        try:
            if clearing:
                return self._clear_bootstrap(ctx)
            if where == Place.AGENT:
                row = services.agent_file_save(
                    actor=ctx.actor, agent=ctx.agent, name=path, content=content, append=append, via="tool"
                )
                whose = "for the agent (shared by every user)"
            else:
                row = services.user_file_save(
                    actor=ctx.actor,
                    agent=ctx.agent,
                    user_id=ctx.user_id,
                    name=path,
                    content=content,
                    append=append,
                    via="tool",
                )
                whose = "as this user's own copy"
        except ServiceError as error:
            return ToolResult.error(error.message.removeprefix("content: "))
        total = services.size_of(row.content)
        added = services.size_of(content)
        text = (
            f"Appended {added} bytes to {path} {whose} (now {total} bytes)."
            if append
            else f"Wrote {total} bytes to {path} {whose}."
        )
        return ToolResult.ok(text, path=path, bytes=total, source=self.name)

    def _clear_bootstrap(self, ctx: CallContext) -> ToolResult:
        deleted = services.bootstrap_complete(
            actor=ctx.actor, agent=ctx.agent, user_id=ctx.user_id, via="tool"
        )
        text = f"{BOOTSTRAP} cleared for this user: the first run is complete"
        text += (
            " (their copy is deleted)."
            if deleted
            else "; from now on they no longer read the agent's first-run instructions."
        )
        return ToolResult.ok(text, path=BOOTSTRAP, deleted=deleted, completed=True)

    def entries(self, ctx: CallContext) -> list[vfs.VirtualEntry]:
        shared = selectors.agent_files(tenant=ctx.tenant, agent=ctx.agent)
        own = (
            selectors.user_files(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id)
            if ctx.user_id
            else {}
        )
        # A user whose first run is complete no longer sees the agent's BOOTSTRAP.md.
        bootstrap_done = (
            bool(ctx.user_id)
            and BOOTSTRAP not in own
            and selectors.bootstrap_completion(tenant=ctx.tenant, agent=ctx.agent, user_id=ctx.user_id)
            is not None
        )
        found: list[vfs.VirtualEntry] = []
        for name in NAMES:
            where = route(ctx.agent.type, name).read
            if where == Place.REFUSED or (bootstrap_done and name == BOOTSTRAP):
                continue
            if where == Place.USER and name in own:
                found.append(
                    vfs.VirtualEntry(name, services.size_of(own[name].content), f"{SOURCE}, own copy")
                )
            elif name in shared:
                label = "template" if where == Place.USER and ctx.user_id else "shared"
                found.append(
                    vfs.VirtualEntry(name, services.size_of(shared[name].content), f"{SOURCE}, {label}")
                )
        return found


def register() -> None:
    vfs.register(ContextFileInterceptor(), order=10)
