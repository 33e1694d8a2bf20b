"""The explicit context every tool call runs with. Nothing about a call travels through globals.

:func:`build` is its one constructor: the pipeline uses it for every call, and the test runs of a custom
tool and of a credentialed CLI use it to give their run the context an agent's call would have."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.toolkit.workspace import workspace_for

if TYPE_CHECKING:
    from apps.tenants.actors import Actor
    from apps.tenants.models import Agent, Tenant
    from apps.toolkit.scrubber import Scrubber

ORIGINS = ("user", "comm", "app", "skill", "system")


@dataclass(frozen=True)
class CallContext:
    """Who calls, for whom, where: built once per call (:func:`build`) and passed to the tool."""

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


def tool_settings(tools: Mapping[str, Any], deny_groups: Mapping[str, Any]) -> dict[str, Any]:
    """Per-tool settings as the tools read them: the effective ``tools`` settings, with the exec deny-group
    overrides the policy resolved (tenant, then agent)."""
    result = dict(tools)
    result["exec"] = {**dict(tools.get("exec") or {}), "deny_groups": dict(deny_groups)}
    return result


def build(
    *,
    actor: Actor,
    agent: Agent,
    call_id: str,
    scrubber: Scrubber,
    settings: Mapping[str, Any],
    deny_groups: Mapping[str, Any] | None = None,
    user_id: str = "",
    **scope: Any,
) -> CallContext:
    """The context of one call of ``agent`` for ``user_id`` by ``actor``: its workspace (created on
    demand), the effective runtime ``settings`` (``sandbox``, and ``tools`` merged with the policy's
    exec ``deny_groups`` when given) and the call's ``scope`` (session, channel, origin, allowed tools…)."""
    tools = tool_settings(settings.get("tools") or {}, deny_groups) if deny_groups is not None else {}
    return CallContext(
        tenant=actor.tenant,
        agent=agent,
        actor=actor,
        call_id=call_id,
        workspace=workspace_for(tenant=actor.tenant, agent=agent, user_id=user_id),
        scrubber=scrubber,
        user_id=user_id,
        tool_settings=tools,
        sandbox=settings["sandbox"],
        **scope,
    )
