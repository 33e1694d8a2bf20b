"""Validation rules shared by the models, the API and the dashboard."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError

MAX_SETTINGS_BYTES = 64 * 1024


def validate_settings_object(value: Any) -> None:
    """A settings document is a JSON object of at most ``MAX_SETTINGS_BYTES`` bytes whose runtime keys
    (sandbox, per-tool settings) are valid and which holds none of the keys that moved to the tool
    policy (tool profile, scrubbing, rate limit, exec approvals, origin restrictions, exec deny groups:
    each is refused with its policy key and endpoint)."""
    from apps.toolkit.runtime_settings import validate as validate_runtime

    if not isinstance(value, dict):
        raise ValidationError("Must be a JSON object.")
    if len(json.dumps(value)) > MAX_SETTINGS_BYTES:
        raise ValidationError(f"Must be at most {MAX_SETTINGS_BYTES} bytes of JSON.")
    errors = validate_runtime(value)
    if errors:
        raise ValidationError(
            [f"{key}: {message}" for key, messages in errors.items() for message in messages]
        )
