"""The explicit context every tool call runs with. Nothing about a call travels through globals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.scrubber import Scrubber

ORIGINS = ("user", "comm", "app", "skill", "system")


@dataclass(frozen=True)
class CallContext:
    """Who calls, for whom, where: built once by the pipeline and passed to the tool."""

    tenant: Tenant
    agent: Agent
    actor: Actor
    call_id: str
    workspace: Path  # the directory this call may touch (created by the pipeline)
    scrubber: Scrubber  # per-request: tools register the secrets they use so outputs are cleaned
    user_id: str = ""
    session_key: str = ""
    channel: str = ""
    chat_id: str = ""
    peer_kind: str = ""  # "direct" | "group" | ""
    origin: str = "user"  # one of ORIGINS
    provider: str = ""
    subagent_depth: int = 0
    tool_allow: tuple[str, ...] | None = None
    # The tools this call may use: the policy's, ∩ the channel topic's list, ∩ ``tool_allow`` (the
    # pipeline's; None for a context built elsewhere, which then has no such bound).
    allowed: tuple[str, ...] | None = None
    # Effective per-tool settings (tenant overlaid by agent): {"exec": {...}, "web_search": {...}}
    tool_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Deny groups an exec approval lifted for this one call (only "package_install" can be).
    approved_deny_groups: frozenset[str] = frozenset()
    # The effective ``sandbox`` settings (tenant overlaid by agent; apps.toolkit.sandbox_config).
    sandbox: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sandbox_key(self) -> str:
        """Containers are reused per session; without a session key, per agent."""
        return self.session_key or f"agent:{self.agent.pk}"

    def settings_for(self, tool: str) -> Mapping[str, Any]:
        return self.tool_settings.get(tool, {})
