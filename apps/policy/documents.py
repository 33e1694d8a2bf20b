"""What a policy document may contain per scope, its validation, and the diff between two of them.

The keys are GoClaw's (``profile``, ``allow``, ``deny``, ``alsoAllow``, ``byProvider``,
``shellDenyGroups``, ``execApproval``, ``rate_limit_per_hour``, ``scrub_credentials``), so a GoClaw
``tools`` block or agent ``tools_config`` imports unchanged, plus Toolgate's ``originDeny``. Keys GoClaw
accepts but Toolgate's engine does not use (an agent's ``profile``, which upstream ignores too;
``byProvider.*.deny``; ``browser`` …) are accepted, left out of the stored document and reported as
warnings, never silently dropped.

Saving refuses every unknown tool, group and profile name with close matches. Aliases are refused
too: the engine matches canonical names exactly and case-sensitively (B §1.2), so a ``deny: ["bash"]``
that would not deny ``exec`` is an error, not a false sense of safety. ``*`` patterns are allowed
(``mcp_github__*``); one that selects nothing today is a warning.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apps.policy.models import Scope
from apps.policy.universe import Universe, is_pattern
from apps.toolkit.shell_deny import validate_overrides
from apps.tools.catalog import ALIASES, COMPOSITE_ALIASES, PROFILES

MAX_DOCUMENT_BYTES = 64 * 1024
MAX_LIST = 1000
MAX_NAME = 200
MAX_PROVIDERS = 50

ORIGINS = ("user", "comm", "app", "skill", "system")
SECURITY_LEVELS = ("deny", "allowlist", "full")
ASK_MODES = ("off", "on-miss", "always")

LISTS = ("allow", "deny", "alsoAllow")
KEYS: dict[str, tuple[str, ...]] = {
    Scope.TENANT: (
        "profile",
        "allow",
        "deny",
        "alsoAllow",
        "byProvider",
        "shellDenyGroups",
        "execApproval",
        "rate_limit_per_hour",
        "scrub_credentials",
        "originDeny",
    ),
    Scope.AGENT: ("allow", "deny", "alsoAllow", "byProvider", "shellDenyGroups", "execApproval"),
    Scope.CHANNEL: ("allow",),
}
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {Scope.TENANT: ("profile", "allow"), Scope.AGENT: ("allow",)}

# Accepted for compatibility, not used: key -> why (shown as a warning).
IGNORED: dict[str, dict[str, str]] = {
    Scope.TENANT: {
        "commandKeywordAllowlist": "Toolgate classifies commands itself (exec approvals)",
        "web_fetch": "web_fetch domain lists are not part of the tool policy",
        "browser": "there is no browser tool",
        "mcp_servers": "MCP servers are registered through /api/v1/mcp/servers",
    },
    Scope.AGENT: {
        "profile": "only the tenant's profile and its byProvider profiles are used",
        "wait": "not a policy setting",
        "toolCallPrefix": "not a policy setting",
        "toolPrefix": "not a policy setting",
    },
    Scope.CHANNEL: {},
}
PROVIDER_IGNORED: dict[str, dict[str, str]] = {
    Scope.TENANT: {
        "deny": "deny lists apply to every provider",
        "alsoAllow": "alsoAllow lists apply to every provider",
    },
    Scope.AGENT: {
        "profile": "only the tenant's byProvider profiles are used",
        "deny": "deny lists apply to every provider",
        "alsoAllow": "alsoAllow lists apply to every provider",
    },
}


class PolicyInvalid(ValueError):
    """The document cannot be saved; ``errors`` maps a path ("allow[2]", "byProvider.openai.allow[0]")
    to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        path, messages = next(iter(errors.items()))
        super().__init__(f"{path}: {messages[0]}")


@dataclass
class Checked:
    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _suggest(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


class _Checker:
    def __init__(self, scope: str, universe: Universe) -> None:
        self.scope = scope
        self.universe = universe
        self.errors: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self._group_names = sorted({*universe.groups, *COMPOSITE_ALIASES})

    def bad(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def names(self, path: str, value: Any) -> list[str] | None:
        if not isinstance(value, list):
            self.bad(path, "Must be a list of tool names, group:<name> references or * patterns.")
            return None
        if len(value) > MAX_LIST:
            self.bad(path, f"At most {MAX_LIST} entries.")
            return None
        result: list[str] = []
        for index, name in enumerate(value):
            where = f"{path}[{index}]"
            if not isinstance(name, str) or not name.strip():
                self.bad(where, "Must be a non-empty string.")
                continue
            if len(name) > MAX_NAME or any(c.isspace() or not c.isprintable() for c in name):
                self.bad(where, f"Must be at most {MAX_NAME} printable characters without spaces.")
                continue
            if name.startswith("group:"):
                group = name[len("group:") :]
                if self.universe.group(group) is None:
                    suggestion = _suggest(group, self._group_names)
                    self.bad(
                        where,
                        f"Unknown group {name!r}{suggestion.replace('did you mean ', 'did you mean group:')}",
                    )
                    continue
            elif is_pattern(name):
                if not self.universe.expand([name]):
                    self.warnings.append(f"{where}: the pattern {name!r} matches no tool today.")
            elif name not in self.universe.names:
                if name in ALIASES:
                    self.bad(where, f"{name!r} is an alias; policies name tools: use {ALIASES[name]!r}.")
                else:
                    self.bad(where, f"Unknown tool {name!r}{_suggest(name, self.universe.names)}")
                continue
            if name not in result:
                result.append(name)
        return result

    def profile(self, path: str, value: Any) -> str | None:
        if not isinstance(value, str) or value not in PROFILES:
            shown = value if isinstance(value, str) else json.dumps(value)
            self.bad(
                path,
                f"Unknown profile {shown!r}; use one of {', '.join(PROFILES)}"
                + _suggest(str(value), PROFILES),
            )
            return None
        return value

    def by_provider(self, path: str, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.bad(path, "Must be an object of provider name -> policy.")
            return None
        if len(value) > MAX_PROVIDERS:
            self.bad(path, f"At most {MAX_PROVIDERS} providers.")
            return None
        result: dict[str, Any] = {}
        allowed, ignored = PROVIDER_KEYS[self.scope], PROVIDER_IGNORED[self.scope]
        for provider, spec in value.items():
            where = f"{path}.{provider}"
            if not provider or len(provider) > 100:
                self.bad(where, "A provider name has 1 to 100 characters.")
                continue
            if not isinstance(spec, dict):
                self.bad(where, "Must be an object.")
                continue
            cleaned: dict[str, Any] = {}
            for key, item in spec.items():
                if key in ignored:
                    self.warnings.append(f"{where}.{key} is ignored: {ignored[key]}.")
                elif key not in allowed:
                    self.bad(
                        f"{where}.{key}", f"Unknown key; a provider policy here takes {', '.join(allowed)}."
                    )
                elif key == "profile":
                    checked = self.profile(f"{where}.profile", item)
                    if checked:
                        cleaned["profile"] = checked
                else:
                    names = self.names(f"{where}.{key}", item)
                    if names is not None:
                        cleaned[key] = names
            if cleaned:
                result[provider] = cleaned
        return result

    def exec_approval(self, path: str, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.bad(path, 'Must be an object with "security", "ask" and "allowlist".')
            return None
        unknown = sorted(set(value) - {"security", "ask", "allowlist"})
        if unknown:
            self.bad(path, f"Unknown keys: {', '.join(unknown)}.")
        result: dict[str, Any] = {}
        if "security" in value:
            if value["security"] not in SECURITY_LEVELS:
                self.bad(f"{path}.security", f"Must be one of {', '.join(SECURITY_LEVELS)}.")
            else:
                result["security"] = value["security"]
        if "ask" in value:
            if value["ask"] not in ASK_MODES:
                self.bad(f"{path}.ask", f"Must be one of {', '.join(ASK_MODES)}.")
            else:
                result["ask"] = value["ask"]
        if "allowlist" in value:
            globs = value["allowlist"]
            if (
                not isinstance(globs, list)
                or len(globs) > MAX_LIST
                or not all(isinstance(g, str) and 0 < len(g) <= 500 and g.isprintable() for g in globs)
            ):
                self.bad(
                    f"{path}.allowlist",
                    f"Must be a list of at most {MAX_LIST} glob strings (1-500 characters).",
                )
            else:
                result["allowlist"] = list(dict.fromkeys(globs))
        return result

    def origin_deny(self, path: str, value: Any) -> dict[str, list[str]] | None:
        if not isinstance(value, dict):
            self.bad(path, "Must be an object of origin -> list of tool names.")
            return None
        result: dict[str, list[str]] = {}
        for origin, names in value.items():
            if origin not in ORIGINS:
                self.bad(f"{path}.{origin}", f"Unknown origin; use one of {', '.join(ORIGINS)}.")
                continue
            checked = self.names(f"{path}.{origin}", names)
            if checked:
                result[origin] = checked
        return result

    def shell_deny_groups(self, path: str, value: Any) -> dict[str, bool] | None:
        try:
            return validate_overrides(value)
        except ValueError as exc:
            self.bad(path, str(exc).replace("deny_groups", "shellDenyGroups"))
            return None


def check(scope: str, document: Any, universe: Universe) -> Checked:
    """The document as it will be stored (known keys only, names deduplicated) and its warnings, or
    ``PolicyInvalid`` with every problem."""
    if not isinstance(document, dict):
        raise PolicyInvalid({"document": ["Must be a JSON object."]})
    if len(json.dumps(document)) > MAX_DOCUMENT_BYTES:
        raise PolicyInvalid({"document": [f"Must be at most {MAX_DOCUMENT_BYTES} bytes of JSON."]})
    checker = _Checker(scope, universe)
    result: dict[str, Any] = {}
    for key, value in document.items():
        if key in IGNORED[scope]:
            checker.warnings.append(f"{key} is ignored: {IGNORED[scope][key]}.")
            continue
        if key not in KEYS[scope]:
            policy = f"{'an' if scope == Scope.AGENT else 'a'} {scope} policy"
            checker.bad(
                key, f"Unknown key{_suggest(key, KEYS[scope])}; {policy} takes {', '.join(KEYS[scope])}."
            )
            continue
        cleaned: Any
        if key in LISTS:
            cleaned = checker.names(key, value)
        elif key == "profile":
            cleaned = checker.profile(key, value)
        elif key == "byProvider":
            cleaned = checker.by_provider(key, value)
        elif key == "execApproval":
            cleaned = checker.exec_approval(key, value)
        elif key == "originDeny":
            cleaned = checker.origin_deny(key, value)
        elif key == "shellDenyGroups":
            cleaned = checker.shell_deny_groups(key, value)
        elif key == "rate_limit_per_hour":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
                checker.bad(key, "Must be an integer from 0 (no limit) to 1000000.")
                continue
            cleaned = value
        else:  # scrub_credentials
            if not isinstance(value, bool):
                checker.bad(key, "Must be true or false.")
                continue
            cleaned = value
        if cleaned is not None:
            result[key] = cleaned
    if checker.errors:
        raise PolicyInvalid(checker.errors)
    return Checked(document=result, warnings=checker.warnings)


def _flatten(document: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in (document or {}).items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """What changed, by dotted path: lists as ``{"added": […], "removed": […]}``, other values as
    ``{"from": …, "to": …}`` (None for a key that is absent on that side)."""
    old, new = _flatten(before), _flatten(after)
    changes: dict[str, Any] = {}
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        lists = isinstance(a, list | None) and isinstance(b, list | None)
        if lists and (isinstance(a, list) or isinstance(b, list)):
            a_list, b_list = a or [], b or []
            changes[path] = {
                "added": [x for x in b_list if x not in a_list],
                "removed": [x for x in a_list if x not in b_list],
            }
            continue
        changes[path] = {"from": a, "to": b}
    return changes
