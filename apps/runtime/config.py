"""Runtime settings of a tenant, overlaid per agent: the defaults a new tenant gets, and validation.

They live in ``Tenant.settings`` and ``Agent.settings`` under the keys below. An agent's value replaces
the tenant's for that key, except ``tools``, which is merged key by key at every depth (an agent that
allows one exec deny group keeps the tenant's choices for the others).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from apps.tools.catalog import CATALOG, PROFILES

# A new tenant behaves as GoClaw does out of the box.
DEFAULTS: dict[str, Any] = {
    "tool_profile": "full",
    "scrub_credentials": True,
    "rate_limit_per_hour": 150,
    "exec_approvals": {"security": "full", "ask": "off"},
    "sandbox": {"mode": "off"},
    "origin_deny": {},  # origin -> [tool names]; empty: no origin restrictions
    "tools": {},  # per-tool settings, e.g. {"exec": {"deny_groups": {"package_install": false}}}
}

ORIGINS = ("user", "comm", "app", "skill", "system")
SECURITY_LEVELS = ("deny", "allowlist", "full")
ASK_MODES = ("off", "on-miss", "always")
SANDBOX_MODES = ("off", "non-main", "all")


def effective(tenant_settings: Mapping[str, Any], agent_settings: Mapping[str, Any]) -> dict[str, Any]:
    """The runtime settings for one agent of a tenant: defaults < tenant < agent."""
    result = copy.deepcopy(DEFAULTS)
    for layer in (tenant_settings, agent_settings):
        for key in DEFAULTS:
            if key not in layer:
                continue
            if key == "tools":
                result["tools"] = _merged(result["tools"], layer["tools"])
            else:
                result[key] = copy.deepcopy(layer[key])
    return result


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, objects merged key by key at every depth (an agent's
    ``tools.exec.deny_groups.package_install`` changes that one group, not the tenant's others)."""
    result = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = _merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def validate(settings: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per key for the runtime keys present in ``settings`` (other keys are left alone)."""
    errors: dict[str, list[str]] = {}

    def bad(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    if "tool_profile" in settings and settings["tool_profile"] not in PROFILES:
        bad("tool_profile", f"Unknown profile; use one of {', '.join(PROFILES)}.")
    if "scrub_credentials" in settings and not isinstance(settings["scrub_credentials"], bool):
        bad("scrub_credentials", "Must be true or false.")
    if "rate_limit_per_hour" in settings:
        value = settings["rate_limit_per_hour"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 1_000_000:
            bad("rate_limit_per_hour", "Must be an integer from 0 (no limit) to 1000000.")
    if "exec_approvals" in settings:
        value = settings["exec_approvals"]
        if not isinstance(value, dict) or set(value) - {"security", "ask"}:
            bad("exec_approvals", 'Must be an object with "security" and "ask".')
        else:
            if value.get("security", "full") not in SECURITY_LEVELS:
                bad("exec_approvals", f"security must be one of {', '.join(SECURITY_LEVELS)}.")
            if value.get("ask", "off") not in ASK_MODES:
                bad("exec_approvals", f"ask must be one of {', '.join(ASK_MODES)}.")
    if "sandbox" in settings:
        value = settings["sandbox"]
        if not isinstance(value, dict) or value.get("mode", "off") not in SANDBOX_MODES:
            bad("sandbox", f'Must be an object whose "mode" is one of {", ".join(SANDBOX_MODES)}.')
    if "origin_deny" in settings:
        value = settings["origin_deny"]
        if not isinstance(value, dict):
            bad("origin_deny", "Must be an object of origin -> list of tool names.")
        else:
            for origin, names in value.items():
                if origin not in ORIGINS:
                    bad("origin_deny", f"Unknown origin {origin!r}; use one of {', '.join(ORIGINS)}.")
                elif not isinstance(names, list) or not all(
                    isinstance(n, str) and n in CATALOG for n in names
                ):
                    bad("origin_deny", f"{origin}: must be a list of catalog tool names.")
    if "tools" in settings:
        value = settings["tools"]
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            bad("tools", "Must be an object of tool name -> settings object.")
        else:
            unknown = sorted(set(value) - set(CATALOG))
            if unknown:
                bad("tools", f"Unknown tools: {', '.join(unknown)}.")
            exec_settings = value.get("exec", {})
            if isinstance(exec_settings, dict) and "deny_groups" in exec_settings:
                from apps.runtime.shell_deny import validate_overrides

                try:
                    validate_overrides(exec_settings["deny_groups"])
                except ValueError as exc:
                    bad("tools", f"exec.deny_groups: {exc}")
    return errors
