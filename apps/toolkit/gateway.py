"""The gateway's one entry point (and its listing), as the apps below it see it.

Every tool call goes through the pipeline (``apps.runtime.pipeline.call``): the REST execute view, the
MCP endpoint, the built-in runner (runs, subagents, cron, team dispatch) and the re-run of a call whose
approval was decided while nobody waited (``apps.policy.tasks``). The domain apps sit below the gateway
and may not import it, so they call :func:`call` here, which the gateway installs when Django starts
(``apps.runtime.apps.RuntimeConfig.ready``). The request and outcome types live here for the same reason.

:func:`tools` is the listing that goes with it (``apps.runtime.selectors.agent_tool_definitions``): the
tools a caller may call in a scope, exactly those :func:`call` lets through the policy. The built-in runner
offers its model this list, as the REST listing and the MCP endpoint serve it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from apps.toolkit.results import ToolResult

if TYPE_CHECKING:
    from apps.policy.engine import CallScope
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent


@dataclass(frozen=True)
class CallRequest:
    """A tool call as an agent loop sends it.

    ``origin`` None means the caller's own (``apps.runtime.caller``); the pipeline replaces it with the
    effective origin, and refuses an origin or an internal channel the caller may not use before
    anything runs or is recorded."""

    agent: Agent
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    session_key: str = ""
    user_id: str = ""
    channel: str = ""
    chat_id: str = ""
    peer_kind: str = ""
    provider: str = ""
    origin: str | None = None
    subagent_depth: int = 0
    tool_allow: tuple[str, ...] | None = None
    style: str = "flat"  # "strap": hints are given in domain-tool form
    run_id: str = ""  # the run whose model made the call: recorded with it, no decision depends on it


@dataclass(frozen=True)
class CallOutcome:
    """A finished call: its result (scrubbed) and the pipeline's decision, as recorded."""

    call_id: str
    result: ToolResult
    decision: str
    resolved_tool: str
    duration_ms: float


@dataclass(frozen=True)
class Decided:
    """A human's decision on a call that did not wait for it, given back to :func:`call` to finish the
    call (``status``: ``allowed``, ``denied`` or ``timed_out``)."""

    call_id: str
    status: str
    reason: str = ""


class Pending(Protocol):
    """A call that waits for a human's decision on ``approval_id`` (the pipeline's ``PendingCall``)."""

    @property
    def approval_id(self) -> uuid.UUID: ...

    @property
    def call_id(self) -> str: ...

    @property
    def wait(self) -> bool: ...


class Entry(Protocol):
    def __call__(
        self, *, actor: Actor, request: CallRequest, wait: bool = True, decided: Decided | None = None
    ) -> CallOutcome | Pending: ...


class Lister(Protocol):
    def __call__(
        self,
        *,
        actor: Actor,
        agent: Agent,
        scope: CallScope,
        session_key: str = "",
    ) -> list[dict[str, Any]]: ...


_entry: Entry | None = None
_lister: Lister | None = None


def install(*, entry: Entry, lister: Lister) -> None:
    """Called once by the gateway app when Django starts."""
    global _entry, _lister
    _entry, _lister = entry, lister


def _missing() -> ImproperlyConfigured:
    return ImproperlyConfigured("the gateway (apps.runtime) is not installed: add it to INSTALLED_APPS")


def call(
    *, actor: Actor, request: CallRequest, wait: bool = True, decided: Decided | None = None
) -> CallOutcome | Pending:
    """Send one call through the pipeline (see ``apps.runtime.pipeline.call``): a finished
    :class:`CallOutcome`, or a :class:`Pending` call when a human has to decide first (with
    ``wait=False`` a background job finishes it once decided)."""
    if _entry is None:
        raise _missing()
    return _entry(actor=actor, request=request, wait=wait, decided=decided)


def tools(*, actor: Actor, agent: Agent, scope: CallScope, session_key: str = "") -> list[dict[str, Any]]:
    """The definitions of the tools ``actor`` may call as ``agent`` in ``scope`` (its origin's
    restrictions, the channel topic's list and the policy applied), sorted by name."""
    if _lister is None:
        raise _missing()
    return _lister(actor=actor, agent=agent, scope=scope, session_key=session_key)


__all__ = ["CallOutcome", "CallRequest", "Decided", "Pending", "call", "install", "tools"]
