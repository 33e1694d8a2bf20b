"""Hypothesis strategies for hostile JSON: any JSON value, biased towards the keys and words a
Toolgate document uses, so that generated input gets past the first checks and into the deep ones."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from apps.policy.documents import ASK_MODES, KEYS, SECURITY_LEVELS
from apps.policy.models import Scope

# The tenant scope's keys (the widest), the keys GoClaw documents nest them under and the
# execApproval's own, so that generated documents reach the deep checks.
POLICY_KEYS = (*KEYS[Scope.TENANT], "security", "ask", "allowlist", "tools", "tools_config")
WORDS = (
    "coding",
    "minimal",
    "full",
    "messaging",
    "group:fs",
    "group:web",
    "group:toolgate",
    "group:mcp",
    "group:nope",
    "exec",
    "read_file",
    "datetime",
    "mcp_github__*",
    "*",
    "openai",
    "anthropic",
    "comm",
    "skill",
    "allowlist",
    "on-miss",
    "always",
    "deny",
    "package_install",
    "network_recon",
    "git *",
    "ls",
    "",
    " ",
    "\u0000",
    "\ud7ff",
    "é" * 300,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(WORDS),
    st.text(max_size=40),
)
keys = st.one_of(st.sampled_from(POLICY_KEYS), st.sampled_from(WORDS), st.text(max_size=20))


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    """Any JSON value (finite numbers), its object keys mostly policy keys."""
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(keys, inner, max_size=6)),
        max_leaves=max_leaves,
    )


TOOL_NAMES = (
    "exec",
    "read_file",
    "write_file",
    "datetime",
    "web_fetch",
    "group:fs",
    "group:web",
    "mcp_github__*",
)
tool_lists = st.lists(st.sampled_from(TOOL_NAMES), max_size=4, unique=True)
plausible = st.fixed_dictionaries(
    {},
    optional={
        "profile": st.sampled_from(["coding", "minimal", "full", "messaging"]),
        "allow": tool_lists,
        "deny": tool_lists,
        "alsoAllow": tool_lists,
        "byProvider": st.dictionaries(
            st.sampled_from(["openai", "anthropic"]),
            st.fixed_dictionaries(
                {}, optional={"profile": st.sampled_from(["minimal", "full"]), "allow": tool_lists}
            ),
            max_size=2,
        ),
        "shellDenyGroups": st.dictionaries(
            st.sampled_from(["package_install", "network_recon"]), st.booleans()
        ),
        "execApproval": st.fixed_dictionaries(
            {},
            optional={
                "security": st.sampled_from(SECURITY_LEVELS),
                "ask": st.sampled_from(ASK_MODES),
                "allowlist": st.lists(st.sampled_from(["git *", "ls", "echo *"]), max_size=3),
            },
        ),
        "rate_limit_per_hour": st.integers(min_value=0, max_value=10_000),
        "scrub_credentials": st.booleans(),
        "originDeny": st.dictionaries(st.sampled_from(["comm", "skill", "cron"]), tool_lists, max_size=2),
    },
)


def policy_documents() -> st.SearchStrategy[Any]:
    """Objects shaped like policy documents (GoClaw's ``tools`` keys and Toolgate's): plausible ones,
    plausible ones with one hostile value, hostile ones, and now and then not an object at all."""
    hostile = st.dictionaries(st.sampled_from(POLICY_KEYS), json_values(12), max_size=8)
    spoiled = st.builds(lambda d, e: {**d, **e}, plausible, st.dictionaries(keys, json_values(4), max_size=1))
    return st.one_of(plausible, spoiled, hostile, json_values(8))
