"""Small presentation helpers for dashboard templates."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.core.serializers.json import DjangoJSONEncoder

register = template.Library()

SUMMARY_CHARS = 160


@register.filter
def compact_json(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters (the live rows use the same format)."""
    if value in ({}, [], None, ""):
        return ""
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "), cls=DjangoJSONEncoder)
    return text if len(text) <= limit else text[: limit - 1] + "…"
