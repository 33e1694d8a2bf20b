"""OPTIONS and HEAD on every dashboard route, and a GET with a body, never fail the server."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db


def _patterns(resolvers: list[Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for entry in resolvers:
        if isinstance(entry, URLResolver):
            found += _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append(prefix + str(entry.pattern))
    return found


def _url(pattern: str) -> str:
    path = re.sub(r"<(?:\w+:)?(\w+)>", "1", pattern).lstrip("^").rstrip("$")
    return "/" + path.replace("\\", "")


def test_options_head_and_get_with_a_body_on_every_page(owner):
    urls = sorted({_url(p) for p in _patterns(get_resolver().url_patterns) if not p.startswith("api/")})
    assert len(urls) > 20
    for url in urls:
        if "(" in url or "admin/" in url or url in ("/readyz", "/healthz"):  # readiness may be 503
            continue
        for response, what in (
            (owner.options(url), "OPTIONS"),
            (owner.head(url), "HEAD"),
            (owner.generic("GET", url, '{"junk": ', content_type="application/json"), "GET with a body"),
        ):
            assert response.status_code < 500, f"{what} {url}: {response.status_code}"
