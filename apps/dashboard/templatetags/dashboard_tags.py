"""Small presentation helpers for dashboard templates."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
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


@register.filter
def pretty_json(value: Any) -> str:
    """``value`` as indented JSON with sorted keys (the live rows' prettyJson gives the same text)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, cls=DjangoJSONEncoder)


def _fixed(value: float, digits: int) -> str:
    """Like JavaScript's ``toFixed``: halves round up (Python's format rounds them to even), so a
    server-rendered row and a live one show the same text."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


@register.filter
def byte_size(value: int | None) -> str:
    """A byte count in short form: ``312 B``, ``4.2 KB``, ``1.5 MB`` (binary units, like live rows)."""
    size = int(value or 0)
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{_fixed(size / 1024, 1)} KB"
    return f"{_fixed(size / (1024 * 1024), 1)} MB"


@register.filter
def duration(value: float | None) -> str:
    """Milliseconds in short form: ``0.4 ms``, ``12.3 ms``, ``2.35 s``."""
    ms = float(value or 0)
    return f"{_fixed(ms, 1)} ms" if ms < 1000 else f"{_fixed(ms / 1000, 2)} s"
