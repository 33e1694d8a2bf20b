"""Validation rules shared by the models, the API and the dashboard.

A settings document's keys belong to the apps that read them: each registers its check here from its
``ready()`` (:func:`register_settings_check`; the toolkit registers the runtime settings' check,
``apps.toolkit.runtime_settings.validate``), so that the tenancy primitives import no app above them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError

MAX_SETTINGS_BYTES = 64 * 1024

# A check takes the settings document and answers its errors by key (empty when it is valid).
SettingsCheck = Callable[[dict[str, Any]], Mapping[str, Sequence[str]]]
_checks: list[SettingsCheck] = []


def register_settings_check(check: SettingsCheck) -> None:
    """Add ``check`` to every validation of a settings document (once, whatever the calls)."""
    if check not in _checks:
        _checks.append(check)


def validate_settings_object(value: Any) -> None:
    """A settings document is a JSON object of at most ``MAX_SETTINGS_BYTES`` bytes whose runtime keys
    (sandbox, per-tool settings) are valid and which holds none of the keys that moved to the tool
    policy (tool profile, scrubbing, rate limit, exec approvals, origin restrictions, exec deny groups:
    each is refused with its policy key and endpoint)."""
    if not isinstance(value, dict):
        raise ValidationError("Must be a JSON object.")
    if len(json.dumps(value)) > MAX_SETTINGS_BYTES:
        raise ValidationError(f"Must be at most {MAX_SETTINGS_BYTES} bytes of JSON.")
    errors = {key: messages for check in _checks for key, messages in check(value).items()}
    if errors:
        raise ValidationError(
            [f"{key}: {message}" for key, messages in errors.items() for message in messages]
        )
