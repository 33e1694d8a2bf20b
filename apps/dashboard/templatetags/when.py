"""One timestamp format for the whole dashboard: ``{% when value %}`` renders

    <time datetime="2026-11-28T14:03:05Z" title="2026-11-28 14:03:05 UTC">2026-11-28 14:03:05 UTC</time>

and static/js/when.js rewrites its text to the browser's local time in the same shape (the title keeps
UTC). The text the server renders is the fallback without JavaScript. Loaded as a template builtin.
"""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils.html import format_html

register = template.Library()

UTC_FORMAT = "%Y-%m-%d %H:%M:%S"


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:  # stored timestamps are aware; a naive one is taken as UTC already
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


@register.simple_tag(name="when")
def when(value: object, default: str = "—", css_class: str = "") -> str:
    """A timestamp as a ``<time>`` element (UTC in ``datetime`` and ``title``), or ``default`` when the
    value is empty. A date without a time renders as the date alone."""
    if isinstance(value, dt.datetime):
        moment = _utc(value)
        iso = moment.isoformat(timespec="seconds").replace("+00:00", "Z")
        text = f"{moment.strftime(UTC_FORMAT)} UTC"
        if css_class:
            markup = '<time datetime="{}" title="{}" class="{}">{}</time>'
            return format_html(markup, iso, text, css_class, text)
        return format_html('<time datetime="{}" title="{}">{}</time>', iso, text, text)
    if isinstance(value, dt.date):
        return format_html('<time datetime="{}">{}</time>', value.isoformat(), value.isoformat())
    return format_html("{}", default)
