"""Checks of a channel's fields, each problem reported by field, written for the person who typed it.

URLs must be ``https`` (plain ``http`` only for a host inside the SSRF guard's test networks,
``TOOLGATE_SSRF_ALLOW_NETS``), with no user info or fragment, and must pass the SSRF guard: private,
loopback and metadata addresses are refused when the channel is saved, and every send checks the
address again at connect time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from apps.messaging.models import MAX_CHAT_ID_CHARS, MAX_URL_CHARS, NAME_RE, Channel
from apps.messaging.senders import SIGNATURE_HEADER, check_telegram_chat
from apps.policy.universe import is_pattern, universe_for
from apps.tenants.models import Agent
from apps.toolkit import url_checks
from apps.toolkit.ssrf import AddressPolicy
from apps.toolkit.url_checks import has_control

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

MAX_SECRET_CHARS = 500
MAX_TOPICS = 200
MAX_TOPIC_TOOLS = 100
MAX_TOOL_SPEC_CHARS = 200
MAX_AGENTS = 200
TOKEN_RE = re.compile(r"\A\d{3,20}:[A-Za-z0-9_-]{20,100}\Z")
RESERVED_HEADERS = url_checks.CLIENT_HEADERS | {"user-agent", SIGNATURE_HEADER.lower()}
_NAME = re.compile(NAME_RE)


def url_error(url: Any, kind: str, policy: AddressPolicy | None = None) -> str | None:
    """Why ``url`` cannot be the channel's URL (the webhook, or the Telegram Bot API base), or None."""
    example = (
        "https://hooks.example.com/toolgate" if kind == Channel.Kind.WEBHOOK else "https://api.telegram.org"
    )
    if not isinstance(url, str) or not url:
        return f"required, e.g. {example}."

    def parts_error(parsed: httpx.URL) -> str | None:
        if parsed.fragment:
            return "the URL takes no fragment."
        if kind == Channel.Kind.TELEGRAM and parsed.query:
            return f"the Bot API base URL takes no query (e.g. {example})."
        return None

    return url_checks.outbound_url_error(
        url,
        max_chars=MAX_URL_CHARS,
        public_hint="a channel must use a public https address.",
        plain_http_risk="messages and secrets",
        parts_error=parts_error,
        policy=policy,
    )


def headers_error(value: Any) -> str | None:
    return url_checks.headers_error(value, example='{"Authorization": "Bearer …"}', reserved=RESERVED_HEADERS)


def chat_id_error(value: Any, kind: str) -> str | None:
    if not isinstance(value, str):
        return "must be a string."
    if len(value) > MAX_CHAT_ID_CHARS or has_control(value) or any(c.isspace() for c in value):
        return f"at most {MAX_CHAT_ID_CHARS} characters, no spaces or control characters."
    if value and kind == Channel.Kind.TELEGRAM:
        return check_telegram_chat(value)
    return None


def topics_error(value: Any, kind: str, tenant: Tenant) -> str | None:
    """``{chat or topic id: [tool names, group:<name>, patterns with *]}``, each list non-empty."""
    if not isinstance(value, Mapping):
        return (
            'must be an object of chat or topic ids to tool lists, e.g. {"-100123:topic:45": ["web_search"]}.'
        )
    if len(value) > MAX_TOPICS:
        return f"at most {MAX_TOPICS} chats or topics."
    universe = universe_for(tenant)
    names = set(universe.names)
    for key, tools in value.items():
        problem = chat_id_error(key, kind) if isinstance(key, str) and key else "a chat id is required."
        if problem:
            return f"{str(key)[:64]!r}: {problem}"
        if not isinstance(tools, list) or not tools:
            return (
                f"{key}: a non-empty list of tool names or groups (remove the entry to leave the chat "
                "unrestricted)."
            )
        if len(tools) > MAX_TOPIC_TOOLS:
            return f"{key}: at most {MAX_TOPIC_TOOLS} tools or groups."
        for spec in tools:
            if not isinstance(spec, str) or not spec or len(spec) > MAX_TOOL_SPEC_CHARS:
                return (
                    f"{key}: each entry is a tool name or group:<name> of at most "
                    f"{MAX_TOOL_SPEC_CHARS} characters."
                )
            if spec.startswith("group:"):
                if universe.group(spec[len("group:") :]) is None:
                    known = ", ".join(f"group:{g}" for g in sorted(universe.groups))
                    return f"{key}: unknown group {spec!r}; known: {known}."
            elif not is_pattern(spec) and spec not in names:
                return f"{key}: unknown tool {spec!r} (see the tool catalog)."
    return None


def agents_error(value: Any, tenant: Tenant) -> str | None:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        return "must be a list of agent keys (empty: every agent of the tenant)."
    if len(value) > MAX_AGENTS:
        return f"at most {MAX_AGENTS} agents."
    if len(set(value)) != len(value):
        return "an agent is listed twice."
    known = set(Agent.objects.for_tenant(tenant).filter(key__in=value).values_list("key", flat=True))
    missing = [k for k in value if k not in known]
    if missing:
        return f"no agent with the key {missing[0][:64]!r} in this tenant."
    return None


def check_channel(
    fields: Mapping[str, Any], *, kind: str, tenant: Tenant, policy: AddressPolicy | None = None
) -> dict[str, list[str]]:
    """Every problem of a channel's fields, by field. ``kind`` is the channel's (new or stored) kind."""
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str | None) -> None:
        if message:
            errors.setdefault(field, []).append(message)

    if "name" in fields and (not isinstance(fields["name"], str) or not _NAME.match(fields["name"])):
        bad(
            "name",
            "1 to 64 characters: lower-case letters, digits, '-' or '_', starting with a letter or digit.",
        )
    if "kind" in fields and fields["kind"] not in Channel.Kind.values:
        bad("kind", f"one of {', '.join(Channel.Kind.values)}.")
        return errors
    if "enabled" in fields and not isinstance(fields["enabled"], bool):
        bad("enabled", "must be true or false.")
    if "url" in fields:
        bad("url", url_error(fields["url"], kind, policy))
    if "secret" in fields:
        secret = fields["secret"]
        if not isinstance(secret, str) or len(secret) > MAX_SECRET_CHARS or has_control(secret):
            bad("secret", f"a string of at most {MAX_SECRET_CHARS} characters.")
        elif kind == Channel.Kind.TELEGRAM and secret and not TOKEN_RE.match(secret):
            bad("secret", "a Telegram bot token looks like 123456789:AAE… (digits, a colon, then the key).")
    if "extra_headers" in fields:
        bad("extra_headers", headers_error(fields["extra_headers"]))
    if "default_chat_id" in fields:
        bad("default_chat_id", chat_id_error(fields["default_chat_id"], kind))
    if "topics" in fields:
        bad("topics", topics_error(fields["topics"], kind, tenant))
    if "agent_keys" in fields:
        bad("agent_keys", agents_error(fields["agent_keys"], tenant))
    return errors
