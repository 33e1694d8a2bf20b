"""The tool policy engine: which tools an agent may use for one call, and why (SPEC Part A "Policy",
B §1.2).

``evaluate`` is the pipeline, a pure function of the tool universe, the three policy documents that
apply (tenant, agent, channel group) and the call's context; it is what listing, execution and
``explain`` all use, so they cannot disagree. The steps, in order:

1. ``profile``: the tenant's profile (``full`` when unset)
2. ``provider_profile``: ∩ the tenant's ``byProvider[provider].profile``. GoClaw puts it in place of
   step 1, which may widen; here it only narrows, because the provider is whatever the request says
   (SPEC Part A, decisions of 2026-11-27: a request may narrow what its caller gets, never widen it)
3. ``allow``: ∩ the tenant's allow list, when it is not empty
4. ``provider_allow``: ∩ the tenant's ``byProvider[provider].allow``
5. ``agent_allow``: ∩ the agent's allow list
6. ``agent_provider_allow``: ∩ the agent's ``byProvider[provider].allow``
7. ``channel_allow``: ∩ the channel group's allow list (the chat's, else the channel's)
8. ``deny``, ``agent_deny``: minus the tenant's, then the agent's deny list
9. ``also_allow``, ``agent_also_allow``: plus (all tools ∩ the list): alsoAllow beats deny
10. ``subagent_deny``, ``leaf_deny``: the subagent lists when the caller is a subagent (at the maximum
    depth, the leaf list too)
11. ``request_allow``: ∩ the request's own allow list, the final intersection

``resolve`` adds the other policy values (rate limit, scrubbing, exec approvals, origin deny lists, shell
deny groups) and caches the result per (tenant, ``config_version``, agent, provider, user, channel group,
depth): every change the result depends on raises the tenant's ``config_version`` in its own
transaction, and a request reads the version with its tenant, so the cache is exact in every process
with nothing to invalidate. The request's allow list is applied after the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from apps.policy.models import PolicyDocument, Scope
from apps.policy.universe import Universe, universe_for
from apps.tools.catalog import MAX_SPAWN_DEPTH, SUBAGENT_DENY_ALWAYS, SUBAGENT_DENY_LEAF

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

STEPS = (
    "profile",
    "provider_profile",
    "allow",
    "provider_allow",
    "agent_allow",
    "agent_provider_allow",
    "channel_allow",
    "deny",
    "agent_deny",
    "also_allow",
    "agent_also_allow",
    "subagent_deny",
    "leaf_deny",
    "request_allow",
)

# A new tenant behaves as GoClaw does out of the box (SPEC issue 3, "Defaults of a new tenant").
DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "profile": "full",
        "rate_limit_per_hour": 150,
        "scrub_credentials": True,
        "execApproval": MappingProxyType({"security": "full", "ask": "off", "allowlist": ()}),
        "originDeny": MappingProxyType({}),
        "shellDenyGroups": MappingProxyType({}),
    }
)


@dataclass(frozen=True)
class CallScope:
    """What of a call the policy depends on (besides the agent)."""

    provider: str = ""
    user_id: str = ""
    channel: str = ""
    chat_id: str = ""
    subagent_depth: int = 0


@dataclass(frozen=True)
class Documents:
    """The policy documents that apply to one agent and call (empty when a scope has none)."""

    tenant: Mapping[str, Any] = field(default_factory=dict)
    agent: Mapping[str, Any] = field(default_factory=dict)
    channel: Mapping[str, Any] = field(default_factory=dict)
    channel_key: tuple[str, str] | None = None  # (channel, chat_id) of the channel document used


@dataclass(frozen=True)
class Trace:
    """The set after each step that ran (for ``explain``)."""

    steps: list[tuple[str, frozenset[str]]] = field(default_factory=list)


def _provider(document: Mapping[str, Any], provider: str) -> Mapping[str, Any]:
    if not provider:
        return {}
    spec = (document.get("byProvider") or {}).get(provider)
    return spec if isinstance(spec, Mapping) else {}


def evaluate(
    universe: Universe,
    documents: Documents,
    scope: CallScope,
    tool_allow: Sequence[str] | None = None,
    trace: Trace | None = None,
) -> list[str]:
    """The allowed tool names, sorted (stable for prompt caching)."""
    g, a, c = documents.tenant, documents.agent, documents.channel
    every = set(universe.names)

    def step(name: str, value: set[str]) -> set[str]:
        if trace is not None:
            trace.steps.append((name, frozenset(value)))
        return value

    allowed = step("profile", universe.profile(str(g.get("profile") or "full")))
    provider_profile = _provider(g, scope.provider).get("profile")
    if provider_profile:  # narrows only: the provider is the request's word (module docstring, step 2)
        allowed = step("provider_profile", allowed & universe.profile(str(provider_profile)))
    for name, spec in (
        ("allow", g.get("allow")),
        ("provider_allow", _provider(g, scope.provider).get("allow")),
        ("agent_allow", a.get("allow")),
        ("agent_provider_allow", _provider(a, scope.provider).get("allow")),
        ("channel_allow", c.get("allow")),
    ):
        if spec:
            allowed = step(name, allowed & universe.expand(spec))
    for name, spec in (("deny", g.get("deny")), ("agent_deny", a.get("deny"))):
        if spec:
            allowed = step(name, allowed - universe.expand(spec))
    for name, spec in (("also_allow", g.get("alsoAllow")), ("agent_also_allow", a.get("alsoAllow"))):
        if spec:
            allowed = step(name, allowed | (every & universe.expand(spec)))
    if scope.subagent_depth > 0:
        allowed = step("subagent_deny", allowed - set(SUBAGENT_DENY_ALWAYS))
        if scope.subagent_depth >= MAX_SPAWN_DEPTH:
            allowed = step("leaf_deny", allowed - set(SUBAGENT_DENY_LEAF))
    if tool_allow is not None:
        allowed = step("request_allow", allowed & universe.expand(tool_allow))
    return sorted(allowed)


# --- Loading -------------------------------------------------------------------------------------------


def load_documents(tenant: Tenant, agent: Agent | None, channel: str = "", chat_id: str = "") -> Documents:
    """The documents for ``agent`` and a call on ``channel``/``chat_id``, in one query. The channel group
    is the chat's own document if there is one, else the channel's."""
    condition = Q(scope=Scope.TENANT)
    if agent is not None:
        condition |= Q(scope=Scope.AGENT, agent_id=agent.pk)
    if channel:
        condition |= Q(scope=Scope.CHANNEL, channel=channel, chat_id__in=[chat_id, ""] if chat_id else [""])
    tenant_doc: Mapping[str, Any] = {}
    agent_doc: Mapping[str, Any] = {}
    channel_docs: dict[str, Mapping[str, Any]] = {}
    for scope, chat, document in (
        PolicyDocument.objects.for_tenant(tenant)
        .filter(condition)
        .values_list("scope", "chat_id", "document")
    ):
        if scope == Scope.TENANT:
            tenant_doc = document
        elif scope == Scope.AGENT:
            agent_doc = document
        else:
            channel_docs[chat] = document
    key: tuple[str, str] | None = None
    channel_doc: Mapping[str, Any] = {}
    if chat_id and chat_id in channel_docs:
        key, channel_doc = (channel, chat_id), channel_docs[chat_id]
    elif "" in channel_docs:
        key, channel_doc = (channel, ""), channel_docs[""]
    return Documents(tenant=tenant_doc, agent=agent_doc, channel=channel_doc, channel_key=key)


# --- Resolved policy and its cache ----------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """Everything the policy decides for one agent and call scope. Shared between requests: read only."""

    tools: tuple[str, ...]  # sorted, before the request's own allow list
    rate_limit_per_hour: int
    scrub_credentials: bool
    exec_security: str
    exec_ask: str
    exec_allowlist: tuple[str, ...]
    origin_deny: Mapping[str, frozenset[str]]
    shell_deny_groups: Mapping[str, bool]
    universe: Universe

    def allowed(self, tool_allow: Sequence[str] | None = None) -> list[str]:
        """The final list: the cached one, ∩ the request's allow list (step ``request_allow``)."""
        if tool_allow is None:
            return list(self.tools)
        return sorted(set(self.tools) & self.universe.expand(tool_allow))


def _value(key: str, *layers: Mapping[str, Any]) -> Any:
    for layer in reversed(layers):
        if key in layer:
            return layer[key]
    return DEFAULTS[key]


def build(tenant: Tenant, agent: Agent, scope: CallScope) -> Resolved:
    """Resolve without the cache."""
    documents = load_documents(tenant, agent, scope.channel, scope.chat_id)
    universe = universe_for(tenant, agent, scope.user_id)
    tools = evaluate(universe, documents, scope)
    approval: dict[str, Any] = {}
    for layer in (
        DEFAULTS["execApproval"],
        documents.tenant.get("execApproval") or {},
        documents.agent.get("execApproval") or {},
    ):
        approval.update(layer)
    origin_deny = dict(_value("originDeny", documents.tenant))
    shell_groups: dict[str, bool] = {}
    for source in (documents.tenant, documents.agent):
        shell_groups.update(source.get("shellDenyGroups") or {})
    return Resolved(
        tools=tuple(tools),
        rate_limit_per_hour=int(_value("rate_limit_per_hour", documents.tenant)),
        scrub_credentials=bool(_value("scrub_credentials", documents.tenant)),
        exec_security=str(approval.get("security", "full")),
        exec_ask=str(approval.get("ask", "off")),
        exec_allowlist=tuple(approval.get("allowlist") or ()),
        origin_deny=MappingProxyType({k: frozenset(universe.expand(v)) for k, v in origin_deny.items()}),
        shell_deny_groups=MappingProxyType(shell_groups),
        universe=universe,
    )


_CACHE: dict[tuple[Any, ...], Resolved] = {}
_CACHE_MAX = 8192
_lock = threading.Lock()


def cache_key(tenant: Tenant, agent: Agent, scope: CallScope) -> tuple[Any, ...]:
    return (
        tenant.pk,
        tenant.config_version,
        agent.pk,
        scope.provider,
        scope.user_id,
        scope.channel,
        scope.chat_id,
        scope.subagent_depth,
    )


def resolve(tenant: Tenant, agent: Agent, scope: CallScope) -> Resolved:
    """``build``, cached (see the module docstring)."""
    key = cache_key(tenant, agent, scope)
    resolved = _CACHE.get(key)
    if resolved is None:
        resolved = build(tenant, agent, scope)
        with _lock:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = resolved
    return resolved


def clear_cache() -> None:
    with _lock:
        _CACHE.clear()


# --- Explain -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    tool: str
    allowed: bool
    decided_by: str  # the last step that changed it, or "profile"
    trail: tuple[tuple[str, str], ...]  # (step, "removed" | "added") for every step that changed it


def explain_sets(
    universe: Universe, documents: Documents, scope: CallScope, tool_allow: Sequence[str] | None = None
) -> tuple[list[str], list[Explanation]]:
    """The allowed list and, for every tool of the universe, whether it is kept and which steps
    removed or re-added it."""
    trace = Trace()
    allowed = evaluate(universe, documents, scope, tool_allow, trace)
    result: list[Explanation] = []
    for tool in universe.names:
        present = True  # before the profile, every tool is in
        trail: list[tuple[str, str]] = []
        for step, members in trace.steps:
            now = tool in members
            if now != present:
                trail.append((step, "added" if now else "removed"))
                present = now
        decided = trail[-1][0] if trail else "profile"
        result.append(Explanation(tool=tool, allowed=tool in allowed, decided_by=decided, trail=tuple(trail)))
    return allowed, result


def explain(
    tenant: Tenant,
    agent: Agent,
    scope: CallScope,
    tool_allow: Sequence[str] | None = None,
    *,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[str], list[Explanation], Documents]:
    """Explain the policy of ``agent`` for ``scope``, optionally with draft documents in place of the
    saved ones (``overrides``: {"tenant"|"agent"|"channel": document}), for previews before saving."""
    documents = load_documents(tenant, agent, scope.channel, scope.chat_id)
    parts: dict[str, Mapping[str, Any]] = {
        "tenant": documents.tenant,
        "agent": documents.agent,
        "channel": documents.channel,
    }
    for part, document in (overrides or {}).items():
        parts[part] = document
    merged = Documents(
        tenant=parts["tenant"],
        agent=parts["agent"],
        channel=parts["channel"],
        channel_key=documents.channel_key,
    )
    universe = universe_for(tenant, agent, scope.user_id)
    allowed, explanations = explain_sets(universe, merged, scope, tool_allow)
    return allowed, explanations, merged
