"""The tool listing every transport serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.messaging.selectors import call_tool_allow
from apps.policy import listing
from apps.policy.engine import CallScope
from apps.tenants.models import Agent, Tenant
from apps.toolkit import presentation


def agent_tool_definitions(
    *,
    tenant: Tenant,
    agent: Agent,
    scope: CallScope,
    tool_allow: Sequence[str] | None,
    style: presentation.Style = "flat",
    include_unavailable: bool = False,
    session_key: str = "",
) -> list[dict[str, Any]]:
    """The tools ``agent`` may use in ``scope``, with the channel topic's allow list and the request's
    own applied as a call applies them: what the REST listing and the MCP endpoint both serve."""
    return listing.definitions(
        tenant=tenant,
        agent=agent,
        scope=scope,
        tool_allow=call_tool_allow(tenant=tenant, agent=agent, scope=scope, tool_allow=tool_allow),
        style=style,
        include_unavailable=include_unavailable,
        session_key=session_key,
    )
