"""Checks of a provider's fields, each problem reported by field, written for the person who typed it.

The base URL must be ``https`` (plain ``http`` only for a host inside the SSRF guard's test networks,
``TOOLGATE_SSRF_ALLOW_NETS``), with no user info, query or fragment, and must pass the SSRF guard:
private, loopback and metadata addresses are refused when the provider is saved, and every request
checks the address again at connect time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from apps.llm.models import (
    CAPABILITIES,
    MAX_BASE_URL_CHARS,
    MAX_MODEL_CHARS,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    NAME_RE,
    Provider,
)
from apps.runtime.ssrf import AddressPolicy, SSRFBlocked

MAX_API_KEY_CHARS = 1000
MAX_HEADERS = 20
MAX_HEADER_NAME_CHARS = 64
MAX_HEADER_VALUE_CHARS = 2000
MAX_HEADERS_BYTES = 8192
HEADER_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9-]*\Z")
# Headers the HTTP client sets itself (framing, target, body type) or that would change where or how a
# request goes; Authorization comes from the API key.
RESERVED_HEADERS = frozenset(
    {
        "authorization",
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
        "cookie",
    }
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(NAME_RE)


def _has_control(value: str) -> bool:
    return bool(_CONTROL.search(value))


def base_url_error(url: str, policy: AddressPolicy | None = None) -> str | None:
    """Why ``url`` cannot be a provider's base URL, or None."""
    if not url:
        return "required, e.g. https://api.openai.com/v1."
    if len(url) > MAX_BASE_URL_CHARS:
        return f"at most {MAX_BASE_URL_CHARS} characters."
    if any(c.isspace() for c in url) or _has_control(url):
        return "whitespace and control characters are not allowed."
    policy = policy or AddressPolicy.from_settings()
    try:
        parsed = policy.check_url(url)
    except SSRFBlocked as exc:
        return f"{exc}; a provider must be a public https address."
    if parsed.query or parsed.fragment:
        return "the base URL takes no query or fragment (e.g. https://api.openai.com/v1)."
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = policy.resolve(parsed.host, port)
    except SSRFBlocked as exc:
        return f"{exc}; a provider must be a public https address."
    except httpx.ConnectError:
        addresses = []  # a name that does not resolve yet: every request resolves and checks it again
    if parsed.scheme == "http" and not (
        addresses
        and all(any(ip.version == net.version and ip in net for net in policy.allow_nets) for ip in addresses)
    ):
        return "use https: plain http would send the API key unencrypted."
    return None


def model_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string."
    if len(value) > MAX_MODEL_CHARS or _has_control(value) or any(c.isspace() for c in value):
        return f"at most {MAX_MODEL_CHARS} characters, no spaces or control characters."
    return None


def headers_error(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return 'must be an object of header names to values, e.g. {"OpenAI-Organization": "org-…"}.'
    if len(value) > MAX_HEADERS:
        return f"at most {MAX_HEADERS} headers."
    total = 0
    seen: set[str] = set()
    for name, header in value.items():
        if not isinstance(name, str) or not HEADER_NAME_RE.match(name) or len(name) > MAX_HEADER_NAME_CHARS:
            return f"{str(name)[:64]!r} is not a header name (letters, digits and '-', at most 64)."
        if name.lower() in RESERVED_HEADERS:
            return f"{name} is set by Toolgate itself and cannot be configured."
        if name.lower() in seen:
            return f"{name} is given twice."
        seen.add(name.lower())
        if not isinstance(header, str) or len(header) > MAX_HEADER_VALUE_CHARS or _has_control(header):
            return f"the value of {name} must be a string of at most {MAX_HEADER_VALUE_CHARS} characters."
        total += len(name) + len(header.encode())
    if total > MAX_HEADERS_BYTES:
        return f"at most {MAX_HEADERS_BYTES} bytes of headers in all."
    return None


def check_provider(fields: Mapping[str, Any], *, policy: AddressPolicy | None = None) -> dict[str, list[str]]:
    """Every problem of a provider's fields (``name``, ``kind``, ``base_url``, ``api_key``,
    ``extra_headers``, ``models``, ``timeout_seconds``, ``enabled``, ``is_default``), by field."""
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if "name" in fields:
        name = fields["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            bad(
                "name",
                "1 to 64 characters: lower-case letters, digits, '-' or '_', starting with a letter or "
                "digit.",
            )
    if "kind" in fields and fields["kind"] not in Provider.Kind.values:
        bad("kind", f"one of {', '.join(Provider.Kind.values)}.")
    if "base_url" in fields:
        url = fields["base_url"]
        message = base_url_error(url, policy) if isinstance(url, str) else "must be a string."
        if message is not None:
            bad("base_url", message)
    if "api_key" in fields:
        key = fields["api_key"]
        if not isinstance(key, str) or len(key) > MAX_API_KEY_CHARS or _has_control(key):
            bad("api_key", f"at most {MAX_API_KEY_CHARS} characters, no line breaks or control characters.")
    if "extra_headers" in fields and (message := headers_error(fields["extra_headers"])) is not None:
        bad("extra_headers", message)
    if "models" in fields:
        models = fields["models"]
        if not isinstance(models, Mapping):
            bad("models", f"must be an object of capabilities ({', '.join(CAPABILITIES)}) to model names.")
        else:
            for capability, model in models.items():
                if capability not in CAPABILITIES:
                    bad(
                        "models", f"{str(capability)[:40]!r} is no capability; use {', '.join(CAPABILITIES)}."
                    )
                elif (message := model_error(model)) is not None:
                    bad("models", f"{capability}: {message}")
    if "timeout_seconds" in fields:
        timeout = fields["timeout_seconds"]
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int)
            or not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS
        ):
            bad(
                "timeout_seconds",
                f"a whole number of seconds from {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS}.",
            )
    for flag in ("enabled", "is_default"):
        if flag in fields and not isinstance(fields[flag], bool):
            bad(flag, "true or false.")
    return errors
