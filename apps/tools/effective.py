"""Which catalog tools an agent may use for one call.

This is the part of the policy pipeline that needs no policy documents: the profile, the subagent
deny lists, and the per-request allow list as the final intersection. The policy engine extends it
with allow/deny/alsoAllow lists per tenant, agent, provider and channel group.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.tools.catalog import (
    MAX_SPAWN_DEPTH,
    SUBAGENT_DENY_ALWAYS,
    SUBAGENT_DENY_LEAF,
    expand,
    profile_tools,
)


def effective_tools(
    *, profile: str, subagent_depth: int = 0, tool_allow: Sequence[str] | None = None
) -> list[str]:
    """Sorted names (stable for prompt caching) of the tools allowed under these conditions."""
    allowed = profile_tools(profile)
    if subagent_depth > 0:
        allowed -= set(SUBAGENT_DENY_ALWAYS)
        if subagent_depth >= MAX_SPAWN_DEPTH:
            allowed -= set(SUBAGENT_DENY_LEAF)
    if tool_allow is not None:
        allowed &= expand(tuple(tool_allow))
    return sorted(allowed)
