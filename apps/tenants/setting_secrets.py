"""Secret-bearing runtime settings: which keys of ``Tenant.settings`` / ``Agent.settings`` hold a secret,
and how a settings document is split into its public part and its secrets.

A secret never stays in the JSON column. The services take it out of the document on every write and
keep it encrypted in :class:`apps.tenants.models.SettingSecret`, keyed by tenant, agent (or none) and
path; reads show it as ``{"set": true}`` or ``{"set": false}`` at its place in the document; the
pipeline puts the values back into the effective settings of a call and registers them with the call's
scrubber.

What a write may put at a secret's path:

* a non-empty string: the new value (stored encrypted, replacing the old one);
* ``null`` or ``""``: clear it;
* the read shape ``{"set": true|false}``, or nothing at all: leave the stored value as it is (a
  document read, edited and written back keeps the secret).

Resetting the containing tenant key (``"tools": null`` in a tenant PATCH) clears the secrets under it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# Every secret-bearing setting, as its path in the settings document. The web search provider's API
# key is the only one today; a new one only needs its path here.
SECRET_PATHS: tuple[tuple[str, ...], ...] = (("tools", "web_search", "api_key"),)
MAX_SECRET_LENGTH = 1024

# What a write asks for one path: a new value, or None to clear it.
Changes = dict[str, str | None]


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


PATHS: dict[str, tuple[str, ...]] = {dotted(path): path for path in SECRET_PATHS}


def _parent(document: Any, path: tuple[str, ...]) -> dict[str, Any] | None:
    """The object holding the last key of ``path`` in ``document``, or None when there is none."""
    node = document
    for key in path[:-1]:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, dict) else None


def is_status(value: Any) -> bool:
    """True for the read shape ``{"set": true|false}``, which a write may send back unchanged."""
    return isinstance(value, dict) and set(value) == {"set"} and isinstance(value["set"], bool)


def validate(document: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per top-level key for the secrets present in ``document`` (a value that is neither a
    string, null nor the read shape; a string too long or with control characters)."""
    errors: dict[str, list[str]] = {}
    for path in SECRET_PATHS:
        parent = _parent(dict(document), path)
        if parent is None or path[-1] not in parent:
            continue
        value = parent[path[-1]]
        name = dotted(path)
        if value is None or is_status(value):
            continue
        if not isinstance(value, str):
            message = f"{name} must be a string (null or an empty string clears it)."
        elif len(value) > MAX_SECRET_LENGTH:
            message = f"{name} must be at most {MAX_SECRET_LENGTH} characters."
        elif any(ord(c) < 32 or ord(c) == 127 for c in value):
            message = f"{name} must not contain control characters or line breaks."
        else:
            continue
        errors.setdefault(path[0], []).append(message)
    return errors


def split(document: Mapping[str, Any]) -> tuple[dict[str, Any], Changes]:
    """``document`` without its secrets, and what it asks for each secret it names: a value to store
    or None to clear. Paths holding the read shape are left out of both (the stored value stays).
    Call it on a validated document; anything but an object is handed back as it is, for the
    validation to refuse."""
    if not isinstance(document, Mapping):
        return document, {}  # type: ignore[return-value]
    public = copy.deepcopy(dict(document))
    changes: Changes = {}
    for path in SECRET_PATHS:
        parent = _parent(public, path)
        if parent is None or path[-1] not in parent:
            continue
        value = parent.pop(path[-1])
        if is_status(value):
            continue
        changes[dotted(path)] = value.strip() if isinstance(value, str) and value.strip() else None
    return public, changes


def cleared_by_reset(removed_keys: set[str]) -> Changes:
    """The secrets a tenant PATCH clears by resetting their top-level key (``{"tools": null}``)."""
    return {dotted(path): None for path in SECRET_PATHS if path[0] in removed_keys}


def with_status(document: Mapping[str, Any], stored: set[str] | frozenset[str]) -> dict[str, Any]:
    """``document`` as a reader sees it: each secret path shown as ``{"set": bool}`` where its tool's
    settings object exists or a value is stored (``stored``: the dotted paths that have one)."""
    result = copy.deepcopy(dict(document))
    for path in SECRET_PATHS:
        name = dotted(path)
        if name in stored:
            node = result
            for key in path[:-1]:
                child = node.get(key)
                if not isinstance(child, dict):
                    child = node[key] = {}
                node = child
            node[path[-1]] = {"set": True}
        else:
            parent = _parent(result, path)
            if parent is not None:
                parent[path[-1]] = {"set": False}
    return result


def with_values(document: Mapping[str, Any], values: Mapping[str, str | None]) -> dict[str, Any]:
    """``document`` with the secret ``values`` (dotted path -> value) put at their paths: the settings a
    tool reads (or, with None for a value, a write that clears it)."""
    result = copy.deepcopy(dict(document))
    for name, value in values.items():
        path = PATHS.get(name)
        if path is None:
            continue
        node = result
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[path[-1]] = value
    return result
