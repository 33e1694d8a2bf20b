"""Links of the log tables: a cell's value as a filter of the table, keeping the other filters."""

from __future__ import annotations

from typing import Any

from django import template
from django.http import QueryDict

register = template.Library()

# Parameters that are not filters: a new filter starts from the first page.
NOT_FILTERS = ("page", "format")


def filter_query(query: QueryDict, **changes: str) -> str:
    """``query`` without its page (nor its export format), with ``changes`` set, as a query string
    (with its ``?``)."""
    params = query.copy()
    for name in NOT_FILTERS:
        params.pop(name, None)
    for name, value in changes.items():
        params[name] = value
    return "?" + str(params.urlencode())


@register.simple_tag(takes_context=True)
def filter_url(context: dict[str, Any], name: str, value: Any, name2: str = "", value2: Any = "") -> str:
    """The current page's URL filtered on ``name`` = ``value`` (and ``name2`` = ``value2``)."""
    changes = {name: str(value)}
    if name2:
        changes[name2] = str(value2)
    return filter_query(context["request"].GET, **changes)


@register.simple_tag(takes_context=True)
def export_url(context: dict[str, Any], fmt: str) -> str:
    """The current filters with ``format`` = ``fmt`` (for the export links)."""
    return filter_query(context["request"].GET, format=fmt)
