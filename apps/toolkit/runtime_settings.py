"""Runtime settings of a tenant, overlaid per agent: the defaults a new tenant gets, the effective settings of
one agent (``effective``) and validation (``validate``). Plain data and checks over ``Tenant.settings`` and
``Agent.settings`` (no database access), so that every layer above may read them: the gateway, the domain
apps, the sandbox and the tenants' validation.

They live in ``Tenant.settings`` and ``Agent.settings`` under the keys below. An agent's value replaces
the tenant's for that key, except ``tools``, which is merged key by key at every depth (an agent that
sets one exec option keeps the tenant's choices for the others).

What decides an agent's tools and how they may run (tool profile, scrubbing, rate limit, exec approvals,
origin restrictions, exec deny groups) is the tool policy's (``apps.policy``), not the settings': those
keys are refused here with the policy key and endpoint that replace them (``MOVED``).

Secret-bearing keys (``apps.tenants.setting_secrets.SECRET_PATHS``: the web search ``api_key``) are
validated here but never stored in the settings: the tenants services keep them encrypted apart, and
``effective`` gets them back only for a tool call (``secrets``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from apps.tenants import setting_secrets
from apps.toolkit import sandbox_config
from apps.tools.catalog import CATALOG

# A new tenant behaves as GoClaw does out of the box.
DEFAULTS: dict[str, Any] = {
    "sandbox": {"mode": "jail"},  # every process a tenant starts runs in the jail (apps.toolkit.jail)
    "tools": {},  # per-tool settings, e.g. {"exec": {"timeout": 120}}
    # Who runs the agent's turns that Toolgate starts (team tasks dispatched to it): an external runner
    # listening on the team's topic, or Toolgate's built-in runner (apps.runs) with the tenant's provider.
    "runner": "external",
}
RUNNERS = ("external", "builtin")

ORIGINS = ("user", "comm", "app", "skill", "system")
SECURITY_LEVELS = ("deny", "allowlist", "full")
ASK_MODES = ("off", "on-miss", "always")
SANDBOX_MODES = sandbox_config.MODES

TENANT_POLICY = "PUT /api/v1/policy/tenant/"
AGENT_POLICY = "PUT /api/v1/policy/agents/<key>/"

# Settings keys that became policy keys: settings key -> why it is refused.
MOVED: dict[str, str] = {
    "tool_profile": (
        f"tool_profile is now the policy's profile: {TENANT_POLICY} "
        f"(one agent's tools: its allow list, {AGENT_POLICY})."
    ),
    "scrub_credentials": f"scrub_credentials is now the policy's scrub_credentials: {TENANT_POLICY}.",
    "rate_limit_per_hour": f"rate_limit_per_hour is now the policy's rate_limit_per_hour: {TENANT_POLICY}.",
    "exec_approvals": (
        f"exec_approvals is now the policy's execApproval: {TENANT_POLICY} (one agent's: {AGENT_POLICY})."
    ),
    "origin_deny": f"origin_deny is now the policy's originDeny: {TENANT_POLICY}.",
}
MOVED_DENY_GROUPS = (
    f"tools.exec.deny_groups is now the policy's shellDenyGroups: {TENANT_POLICY} "
    f"(one agent's: {AGENT_POLICY})."
)


def effective(
    tenant_settings: Mapping[str, Any],
    agent_settings: Mapping[str, Any],
    *,
    secrets: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The runtime settings for one agent of a tenant: defaults < tenant < agent. ``secrets``: the
    tenant's and the agent's setting secrets (path -> value), put back in their layers for a tool call;
    without them the result holds no secret."""
    result = copy.deepcopy(DEFAULTS)
    layers = (tenant_settings, agent_settings)
    if secrets is not None:
        layers = tuple(  # type: ignore[assignment]
            setting_secrets.with_values(layer, values) for layer, values in zip(layers, secrets, strict=True)
        )
    for layer in layers:
        for key in DEFAULTS:
            if key not in layer:
                continue
            if key == "tools":
                result["tools"] = _merged(result["tools"], layer["tools"])
            elif key == "sandbox":  # key by key: an agent that sets "mode" keeps the tenant's limits
                result["sandbox"] = sandbox_config.merged(result["sandbox"], layer["sandbox"])
            else:
                result[key] = copy.deepcopy(layer[key])
    return result


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, objects merged key by key at every depth (an agent's
    ``tools.exec.timeout`` changes that one option, not the tenant's other exec options)."""
    result = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = _merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def validate(settings: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per key for the runtime keys present in ``settings`` (other keys are left alone); the
    keys that moved to the policy are refused with where they went."""
    errors: dict[str, list[str]] = {}

    def bad(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    for key, message in MOVED.items():
        if key in settings:
            bad(key, message)
    if "sandbox" in settings:
        for message in sandbox_config.validate(settings["sandbox"]):
            bad("sandbox", message)
    if "runner" in settings and settings["runner"] not in RUNNERS:
        bad("runner", f"Must be one of: {', '.join(RUNNERS)}.")
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
                bad("tools", MOVED_DENY_GROUPS)
    for key, messages in setting_secrets.validate(settings).items():
        for message in messages:
            bad(key, message)
    return errors
