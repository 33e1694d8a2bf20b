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
from apps.toolkit import url_checks
from apps.toolkit.ssrf import AddressPolicy
from apps.toolkit.url_checks import has_control

MAX_API_KEY_CHARS = 1000
MAX_HEADERS_BYTES = 8192
# Beside the headers the HTTP client sets itself: Authorization comes from the API key, and no cookies.
RESERVED_HEADERS = url_checks.CLIENT_HEADERS | {"authorization", "cookie"}
_NAME = re.compile(NAME_RE)


def _base_url_parts_error(parsed: httpx.URL) -> str | None:
    if parsed.query or parsed.fragment:
        return "the base URL takes no query or fragment (e.g. https://api.openai.com/v1)."
    return None


def base_url_error(url: str, policy: AddressPolicy | None = None) -> str | None:
    """Why ``url`` cannot be a provider's base URL, or None."""
    if not url:
        return "required, e.g. https://api.openai.com/v1."
    return url_checks.outbound_url_error(
        url,
        max_chars=MAX_BASE_URL_CHARS,
        public_hint="a provider must be a public https address.",
        plain_http_risk="the API key",
        parts_error=_base_url_parts_error,
        policy=policy,
    )


def model_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string."
    if len(value) > MAX_MODEL_CHARS or has_control(value) or any(c.isspace() for c in value):
        return f"at most {MAX_MODEL_CHARS} characters, no spaces or control characters."
    return None


def headers_error(value: Any) -> str | None:
    return url_checks.headers_error(
        value,
        example='{"OpenAI-Organization": "org-…"}',
        reserved=RESERVED_HEADERS,
        max_total_bytes=MAX_HEADERS_BYTES,
    )


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
        if not isinstance(key, str) or len(key) > MAX_API_KEY_CHARS or has_control(key):
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
