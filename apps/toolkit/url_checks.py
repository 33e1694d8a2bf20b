"""Checks of an outbound URL and of extra request headers that a tenant admin configures, with messages
written for the person who typed them.

A URL passes :class:`~apps.toolkit.ssrf.AddressPolicy` when it is saved (scheme, no user info, no
metadata or private host); its name is resolved once here for a clear answer, and every request checks
the address again at connect time. Plain ``http`` is accepted only for a host whose every address lies
inside the SSRF guard's test networks (``TOOLGATE_SSRF_ALLOW_NETS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

import httpx

from apps.toolkit.ssrf import AddressPolicy, SSRFBlocked

MAX_HEADERS = 20
MAX_HEADER_NAME_CHARS = 64
MAX_HEADER_VALUE_CHARS = 2000
HEADER_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9-]*\Z")
# Headers the HTTP client sets itself (framing, target, body type) or that would change where or how a
# request goes, refused in every configured header set.
CLIENT_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def has_control(value: str) -> bool:
    """Whether ``value`` holds an ASCII control character (line breaks and tabs included)."""
    return bool(_CONTROL.search(value))


def outbound_url_error(
    url: str,
    *,
    max_chars: int,
    public_hint: str,
    plain_http_risk: str,
    parts_error: Callable[[httpx.URL], str | None],
    policy: AddressPolicy | None = None,
) -> str | None:
    """Why the non-empty ``url`` cannot be a configured outbound URL, or None.

    ``public_hint`` follows the guard's reason when the address is refused; ``parts_error`` judges the
    parsed URL's query and fragment before any name is resolved; ``plain_http_risk`` says what plain
    ``http`` would expose when it is refused.
    """
    if len(url) > max_chars:
        return f"at most {max_chars} characters."
    if any(c.isspace() for c in url) or has_control(url):
        return "whitespace and control characters are not allowed."
    policy = policy or AddressPolicy.from_settings()
    try:
        parsed = policy.check_url(url)
    except SSRFBlocked as exc:
        return f"{exc}; {public_hint}"
    if (problem := parts_error(parsed)) is not None:
        return problem
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = policy.resolve(parsed.host, port)
    except SSRFBlocked as exc:
        return f"{exc}; {public_hint}"
    except httpx.ConnectError:
        addresses = []  # a name that does not resolve yet: every request resolves and checks it again
    if parsed.scheme == "http" and not (
        addresses
        and all(any(ip.version == net.version and ip in net for net in policy.allow_nets) for ip in addresses)
    ):
        return f"use https: plain http would send {plain_http_risk} unencrypted."
    return None


def headers_error(
    value: Any, *, example: str, reserved: Collection[str], max_total_bytes: int | None = None
) -> str | None:
    """Why ``value`` cannot be a set of extra request headers, or None.

    ``reserved`` are lower-case names Toolgate sets itself; ``example`` shows a valid object;
    ``max_total_bytes`` bounds names and UTF-8 values together when given.
    """
    if not isinstance(value, Mapping):
        return f"must be an object of header names to values, e.g. {example}."
    if len(value) > MAX_HEADERS:
        return f"at most {MAX_HEADERS} headers."
    total = 0
    seen: set[str] = set()
    for name, header in value.items():
        if not isinstance(name, str) or not HEADER_NAME_RE.match(name) or len(name) > MAX_HEADER_NAME_CHARS:
            return f"{str(name)[:64]!r} is not a header name (letters, digits and '-', at most 64)."
        if name.lower() in reserved:
            return f"{name} is set by Toolgate itself and cannot be configured."
        if name.lower() in seen:
            return f"{name} is given twice."
        seen.add(name.lower())
        if not isinstance(header, str) or len(header) > MAX_HEADER_VALUE_CHARS or has_control(header):
            return f"the value of {name} must be a string of at most {MAX_HEADER_VALUE_CHARS} characters."
        total += len(name) + len(header.encode())
    if max_total_bytes is not None and total > max_total_bytes:
        return f"at most {max_total_bytes} bytes of headers in all."
    return None
