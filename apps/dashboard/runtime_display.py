"""Runtime settings and policy values as rows a person can read: label, value in words, and where the
value comes from.

Used by the runtime settings page (defaults < tenant) and the agent edit page (defaults < tenant < agent).
The settings rows are what ``Tenant.settings``/``Agent.settings`` hold (sandbox, per-tool settings); the
policy rows are the values the tool policy decides (profile, scrubbing, rate limit, exec approvals,
origin restrictions, exec deny groups), shown read-only: they are changed in the policy editor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from django.db.models import Q

from apps.policy import engine
from apps.policy.models import PolicyDocument, Scope
from apps.tenants import setting_secrets
from apps.toolkit.runtime_settings import DEFAULTS, effective

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

Source = Literal["default", "tenant", "agent"]

LABELS: dict[str, str] = {
    "sandbox": "Sandbox",
    "tools": "Per-tool settings",
    "runner": "Runner of dispatched turns",
}
assert set(LABELS) == set(DEFAULTS), "every runtime key needs a label"

# The policy values shown next to the settings, in this order: policy key -> label.
POLICY_LABELS: dict[str, str] = {
    "profile": "Tool profile",
    "scrub_credentials": "Scrub credentials",
    "rate_limit_per_hour": "Rate limit",
    "execApproval": "Exec approvals",
    "originDeny": "Origin restrictions",
    "shellDenyGroups": "Exec deny groups",
}
# Policy values an agent's own policy may set (the others are the tenant's only).
AGENT_POLICY_KEYS = ("execApproval", "shellDenyGroups")


@dataclass(frozen=True)
class SettingRow:
    key: str
    label: str
    value: str  # in words
    source: Source
    # Only for the agent page: the tenant's keys of "tools" an agent replaced (the rest still apply).
    note: str = ""
    policy: bool = False  # a value of the tool policy (read-only here)

    @property
    def source_label(self) -> str:
        if self.policy:
            return {
                "default": "default",
                "tenant": "set in the tenant policy",
                "agent": "set in this agent's policy",
            }[self.source]
        return {"default": "default", "tenant": "set for this tenant", "agent": "set for this agent"}[
            self.source
        ]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def describe(key: str, value: Any) -> str:
    """``value`` of settings or policy key ``key`` in words (compact JSON for shapes it doesn't know)."""
    if key == "profile":
        return str(value)
    if key == "scrub_credentials":
        return "on" if value else "off"
    if key == "rate_limit_per_hour" and isinstance(value, int):
        return "no limit" if value == 0 else f"{value} calls per session per hour"
    if key == "execApproval" and isinstance(value, Mapping):
        text = f"security: {value.get('security', 'full')} · ask: {value.get('ask', 'off')}"
        allowlist = list(value.get("allowlist") or ())
        return text + (f" · allowlist: {', '.join(allowlist)}" if allowlist else "")
    if key == "originDeny" and isinstance(value, Mapping):
        parts = [f"{origin}: {', '.join(names)}" for origin, names in sorted(value.items()) if names]
        return "; ".join(parts) if parts else "none"
    if key == "shellDenyGroups" and isinstance(value, Mapping):
        allowed = sorted(name for name, denied in value.items() if not denied)
        denied = sorted(name for name, on in value.items() if on)
        parts = ([f"allowed: {', '.join(allowed)}"] if allowed else []) + (
            [f"denied: {', '.join(denied)}"] if denied else []
        )
        return " · ".join(parts) if parts else "every group denied (default)"
    if key == "sandbox" and isinstance(value, dict):
        extra = {k: v for k, v in value.items() if k != "mode"}
        return f"mode: {value.get('mode', 'off')}" + (f" · {_compact(extra)}" if extra else "")
    if key == "tools" and isinstance(value, dict):
        return _compact(value) if value else "none"
    if key == "runner" and isinstance(value, str):
        return {"external": "an external runner (team topic)", "builtin": "Toolgate's built-in runner"}.get(
            value, value
        )
    return _compact(value)


def setting_rows(
    tenant_settings: Mapping[str, Any],
    agent_settings: Mapping[str, Any] | None = None,
    *,
    secret_paths: frozenset[str] = frozenset(),
) -> list[SettingRow]:
    """One row per runtime settings key, in the order of the defaults, with the value in effect and its
    source. ``secret_paths``: the secret-bearing keys stored for the tenant or the agent, shown as
    ``{"set": true}`` (the values are never read here)."""
    agent = agent_settings or {}
    values = setting_secrets.with_status(effective(tenant_settings, agent), secret_paths)
    rows = []
    for key in DEFAULTS:
        source: Source = "agent" if key in agent else "tenant" if key in tenant_settings else "default"
        note = ""
        if key == "tools" and source == "agent" and isinstance(agent.get("tools"), dict):
            # "tools" merges per tool, so the tenant's other tools still apply: say which ones the agent set.
            note = "agent sets: " + (", ".join(sorted(agent["tools"])) or "nothing")
        rows.append(SettingRow(key, LABELS[key], describe(key, values[key]), source, note))
    return rows


def policy_rows(tenant: Tenant, agent: Agent | None = None) -> list[SettingRow]:
    """One row per policy value, as the engine resolves it (defaults < tenant policy < agent policy for
    the keys an agent may set), read from the saved documents in one query."""
    condition = Q(scope=Scope.TENANT)
    if agent is not None:
        condition |= Q(scope=Scope.AGENT, agent_id=agent.pk)
    scopes = PolicyDocument.objects.for_tenant(tenant).filter(condition)
    documents = {scope: document for scope, document in scopes.values_list("scope", "document")}
    tenant_doc: Mapping[str, Any] = documents.get(Scope.TENANT) or {}
    agent_doc: Mapping[str, Any] = documents.get(Scope.AGENT) or {}
    rows = []
    for key, label in POLICY_LABELS.items():
        value: Any = engine.DEFAULTS[key]
        source: Source = "default"
        note = ""
        if key in tenant_doc:
            value, source = tenant_doc[key], "tenant"
        if key in AGENT_POLICY_KEYS and key in agent_doc:
            # Both merge key by key over the tenant's (engine.build).
            value, source = {**dict(value), **dict(agent_doc[key])}, "agent"
            note = "agent sets: " + (", ".join(sorted(agent_doc[key])) or "nothing")
        if key == "execApproval":
            value = {**dict(engine.DEFAULTS["execApproval"]), **dict(value)}
        rows.append(SettingRow(key, label, describe(key, value), source, note, policy=True))
    return rows
