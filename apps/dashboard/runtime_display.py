"""Runtime settings as rows a person can read: label, value in words, and where the value comes from.

Used by the runtime settings page (defaults < tenant) and the agent edit page (defaults < tenant < agent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from apps.runtime.config import DEFAULTS, effective

Source = Literal["default", "tenant", "agent"]

LABELS: dict[str, str] = {
    "tool_profile": "Tool profile",
    "scrub_credentials": "Scrub credentials",
    "rate_limit_per_hour": "Rate limit",
    "exec_approvals": "Exec approvals",
    "sandbox": "Sandbox",
    "origin_deny": "Origin restrictions",
    "tools": "Per-tool settings",
}
assert set(LABELS) == set(DEFAULTS), "every runtime key needs a label"


@dataclass(frozen=True)
class SettingRow:
    key: str
    label: str
    value: str  # in words
    source: Source
    # Only for the agent page: the tenant's keys of "tools" an agent replaced (the rest still apply).
    note: str = ""

    @property
    def source_label(self) -> str:
        return {"default": "default", "tenant": "set for this tenant", "agent": "set for this agent"}[
            self.source
        ]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def describe(key: str, value: Any) -> str:
    """``value`` of runtime key ``key`` in words (falls back to compact JSON for shapes it doesn't know)."""
    if key == "tool_profile":
        return str(value)
    if key == "scrub_credentials":
        return "on" if value else "off"
    if key == "rate_limit_per_hour" and isinstance(value, int):
        return "no limit" if value == 0 else f"{value} calls per session per hour"
    if key == "exec_approvals" and isinstance(value, dict):
        extra = {k: v for k, v in value.items() if k not in {"security", "ask"}}
        text = f"security: {value.get('security', 'full')} · ask: {value.get('ask', 'off')}"
        return text + (f" · {_compact(extra)}" if extra else "")
    if key == "sandbox" and isinstance(value, dict):
        extra = {k: v for k, v in value.items() if k != "mode"}
        return f"mode: {value.get('mode', 'off')}" + (f" · {_compact(extra)}" if extra else "")
    if key == "origin_deny" and isinstance(value, dict):
        parts = [f"{origin}: {', '.join(names)}" for origin, names in sorted(value.items()) if names]
        return "; ".join(parts) if parts else "none"
    if key == "tools" and isinstance(value, dict):
        return _compact(value) if value else "none"
    return _compact(value)


def setting_rows(
    tenant_settings: Mapping[str, Any], agent_settings: Mapping[str, Any] | None = None
) -> list[SettingRow]:
    """One row per runtime key, in the order of the defaults, with the value in effect and its source."""
    agent = agent_settings or {}
    values = effective(tenant_settings, agent)
    rows = []
    for key in DEFAULTS:
        source: Source = "agent" if key in agent else "tenant" if key in tenant_settings else "default"
        note = ""
        if key == "tools" and source == "agent" and isinstance(agent.get("tools"), dict):
            # "tools" merges per tool, so the tenant's other tools still apply: say which ones the agent set.
            note = "agent sets: " + (", ".join(sorted(agent["tools"])) or "nothing")
        rows.append(SettingRow(key, LABELS[key], describe(key, values[key]), source, note))
    return rows
