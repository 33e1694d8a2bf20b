"""A team's settings document (SPEC B §2.8): validation when saved, and typed reads with the defaults.

Upstream fails *open* on a malformed access list; here a document is validated when it is saved, so a
stored one is always well-formed, and reads still fall back to the defaults for anything missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_BYTES = 32 * 1024
NOTIFICATION_KEYS = ("dispatched", "progress", "failed", "completed", "commented", "new_task", "slow_tool")
NOTIFICATION_DEFAULTS: dict[str, bool] = {
    "dispatched": True,
    "progress": False,
    "failed": False,
    "completed": True,
    "commented": False,
    "new_task": True,
    "slow_tool": False,
}
ESCALATION_MODES = ("auto", "review", "reject")
LIST_KEYS = ("allow_user_ids", "deny_user_ids", "allow_channels", "deny_channels")
KEYS = (
    "version",
    *LIST_KEYS,
    "notifications",
    "followup_interval_minutes",
    "followup_max_reminders",
    "escalation_mode",
    "escalation_actions",
    "blocker_escalation",
    "member_requests",
    "workspace_scope",
    "workspace_quota_mb",
    "progress_notifications",
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(settings: Any) -> dict[str, list[str]]:
    """Errors per key (empty when the document may be saved)."""
    errors: dict[str, list[str]] = {}

    def bad(key: str, message: str) -> None:
        errors.setdefault(key, []).append(message)

    if not isinstance(settings, dict):
        return {"settings": ["Must be a JSON object."]}
    if len(json.dumps(settings)) > MAX_BYTES:
        return {"settings": [f"Must be at most {MAX_BYTES} bytes of JSON."]}
    for key, value in settings.items():
        if key not in KEYS:
            bad(key, f"Unknown key; a team's settings take {', '.join(KEYS)}.")
        elif key == "version":
            if not _is_int(value) or not 1 <= value <= 10:
                bad(key, "Must be an integer from 1 to 10.")
        elif key in LIST_KEYS:
            if (
                not isinstance(value, list)
                or len(value) > 1000
                or not all(isinstance(v, str) and 0 < len(v) <= 255 for v in value)
            ):
                bad(key, "Must be a list of at most 1000 strings of 1-255 characters.")
        elif key == "notifications":
            if not isinstance(value, dict):
                bad(key, "Must be an object.")
                continue
            for name, flag in value.items():
                if name == "mode":
                    if flag not in ("direct", "leader"):
                        bad(key, 'mode must be "direct" or "leader".')
                elif name not in NOTIFICATION_KEYS or not isinstance(flag, bool):
                    bad(key, f"{name}: use true/false for {', '.join(NOTIFICATION_KEYS)} and mode.")
        elif key == "followup_interval_minutes":
            if not _is_int(value) or not 1 <= value <= 7 * 24 * 60:
                bad(key, "Must be an integer number of minutes from 1 to 10080.")
        elif key == "followup_max_reminders":
            if not _is_int(value) or not 0 <= value <= 1000:
                bad(key, "Must be an integer from 0 (no limit) to 1000.")
        elif key == "escalation_mode":
            if value not in ESCALATION_MODES:
                bad(key, f"Must be one of {', '.join(ESCALATION_MODES)}.")
        elif key == "escalation_actions":
            if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= 100 for v in value):
                bad(key, "Must be a list of strings.")
        elif key == "blocker_escalation":
            if (
                not isinstance(value, dict)
                or set(value) - {"enabled"}
                or not isinstance(value.get("enabled", True), bool)
            ):
                bad(key, 'Must be {"enabled": true|false}.')
        elif key == "member_requests":
            if (
                not isinstance(value, dict)
                or set(value) - {"enabled", "auto_dispatch"}
                or not all(isinstance(v, bool) for v in value.values())
            ):
                bad(key, 'Must be {"enabled": bool, "auto_dispatch": bool}.')
        elif key == "workspace_scope":
            if value not in ("shared", "chat"):
                bad(key, 'Must be "shared" or "chat".')
        elif key == "workspace_quota_mb":
            if not _is_int(value) or not 0 <= value <= 1_000_000:
                bad(key, "Must be an integer number of MB (0: no quota).")
        elif key == "progress_notifications" and not isinstance(value, bool):
            bad(key, "Must be true or false.")
    return errors


def blocker_escalation(settings: Mapping[str, Any]) -> bool:
    value = settings.get("blocker_escalation")
    if isinstance(value, Mapping) and isinstance(value.get("enabled"), bool):
        return bool(value["enabled"])
    return True


def member_requests(settings: Mapping[str, Any]) -> tuple[bool, bool]:
    """(enabled, auto_dispatch)."""
    value = settings.get("member_requests")
    if not isinstance(value, Mapping):
        return False, False
    return value.get("enabled") is True, value.get("auto_dispatch") is True


def followup_interval_minutes(settings: Mapping[str, Any]) -> int:
    value = settings.get("followup_interval_minutes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 30


def followup_max_reminders(settings: Mapping[str, Any]) -> int:
    value = settings.get("followup_max_reminders")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def shared_workspace(settings: Mapping[str, Any]) -> bool:
    return settings.get("workspace_scope") == "shared"


def notifications(settings: Mapping[str, Any]) -> dict[str, Any]:
    value = settings.get("notifications")
    result: dict[str, Any] = {**NOTIFICATION_DEFAULTS, "mode": "direct"}
    if isinstance(value, Mapping):
        result.update({k: v for k, v in value.items() if k in result})
    return result
