"""Validation of a custom tool's fields, each problem reported by field (the API's 400 ``details``), and
the names a custom tool may not take (a built-in tool's, an alias's, a domain tool's or an MCP tool's:
409, because a call by that name must keep meaning the other tool).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from apps.custom_tools import rendering
from apps.custom_tools.models import MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, NAME_RE
from apps.mcp_grants import naming
from apps.toolkit.processes import ENV_STRIP_NAMES, ENV_STRIP_PREFIXES
from apps.toolkit.strap import DOMAINS
from apps.tools.catalog import ALIASES, CATALOG

MAX_DESCRIPTION = 4000
MAX_COMMAND = 8192
MAX_SCHEMA_BYTES = 64 * 1024
MAX_PROPERTIES = 64
MAX_SCHEMA_DEPTH = 32
MAX_WORKING_DIR = 1024
MAX_ENV_VARS = 64
MAX_ENV_VALUE = 16 * 1024
ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
PROPERTY_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Errors = dict[str, list[str]]


def reserved_name(name: str) -> str | None:
    """Why ``name`` cannot be a custom tool's name, or None when it is free of built-in meaning."""
    if name in CATALOG:
        return f"{name!r} is a built-in tool."
    if name in ALIASES:
        return f"{name!r} is an alias of the built-in tool {ALIASES[name]!r}."
    if name in DOMAINS:
        return f"{name!r} is a domain tool (the grouped form of the built-in tools)."
    if naming.split(name) is not None:
        return f"{name!r} has the form of an MCP tool's name (mcp_<server>__<tool>), kept for MCP servers."
    return None


def _check_name(value: Any) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string."]
    if not re.match(NAME_RE, value):
        return ["1 to 64 characters: a lower-case letter, then lower-case letters, digits or '_'."]
    return []


def _refs(value: Any) -> list[str]:
    """Every ``$ref`` / ``$dynamicRef`` value in a schema."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if key in {"$ref", "$dynamicRef"} and isinstance(inner, str):
                    found.append(inner)
                else:
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (without recursion: any input is safe)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((inner, level + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return deepest


def _check_parameters(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ['must be a JSON Schema object, e.g. {"type": "object", "properties": {...}}.']
    if _depth(value) > MAX_SCHEMA_DEPTH:
        return [f"nests objects and arrays more than {MAX_SCHEMA_DEPTH} levels deep."]
    if len(json.dumps(value)) > MAX_SCHEMA_BYTES:
        return [f"at most {MAX_SCHEMA_BYTES} bytes of JSON."]
    if value.get("type") != "object":
        return ['the schema must describe an object: "type": "object".']
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return [f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"]
    problems: list[str] = []
    remote = [ref for ref in _refs(value) if not ref.startswith("#")]
    if remote:
        problems.append(f"only references inside the schema (#/...) are allowed, not {remote[0]!r}.")
    properties = value.get("properties", {})
    if len(properties) > MAX_PROPERTIES:
        problems.append(f"at most {MAX_PROPERTIES} properties.")
    bad = [name for name in properties if not PROPERTY_RE.match(name)]
    if bad:
        problems.append(
            f"property names are letters, digits and '_' (not starting with a digit): {bad[0]!r}."
        )
    unknown = [name for name in value.get("required", []) if name not in properties]
    if unknown:
        problems.append(f"required names a property that is not defined: {unknown[0]!r}.")
    return problems


def _check_command(value: Any) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string."]
    if not value.strip():
        return ["may not be empty."]
    if len(value) > MAX_COMMAND:
        return [f"at most {MAX_COMMAND} characters."]
    if "\x00" in value:
        return ["may not contain a NUL byte."]
    return []


def _check_working_dir(value: Any) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string."]
    if len(value) > MAX_WORKING_DIR:
        return [f"at most {MAX_WORKING_DIR} characters."]
    if _CONTROL.search(value):
        return ["may not contain control characters."]
    if value.startswith("~") or os.path.isabs(value):
        return ["a directory relative to the agent's workspace, e.g. 'tools/dns' (empty: the workspace)."]
    if value and os.path.normpath(value).split(os.sep)[0] == "..":
        return ["must stay inside the agent's workspace (no '..' above it)."]
    return []


def _check_timeout(value: Any) -> list[str]:
    if not isinstance(value, int) or isinstance(value, bool):
        return ["must be a whole number of seconds."]
    if not MIN_TIMEOUT_SECONDS <= value <= MAX_TIMEOUT_SECONDS:
        return [f"between {MIN_TIMEOUT_SECONDS} and {MAX_TIMEOUT_SECONDS} seconds."]
    return []


def _check_env(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["must be an object mapping variable names to string values."]
    if len(value) > MAX_ENV_VARS:
        return [f"at most {MAX_ENV_VARS} variables."]
    problems: list[str] = []
    for name, secret in value.items():
        if not ENV_NAME_RE.match(name):
            problems.append(f"{name[:130]!r} is not a variable name (letters, digits, '_').")
        elif name in ENV_STRIP_NAMES or name.startswith(ENV_STRIP_PREFIXES):
            problems.append(f"{name} changes how programs are loaded or shells start; it cannot be set.")
        elif not isinstance(secret, str):
            problems.append(f"the value of {name} must be a string.")
        elif len(secret) > MAX_ENV_VALUE:
            problems.append(f"the value of {name} is longer than {MAX_ENV_VALUE} characters.")
        elif "\x00" in secret:
            problems.append(f"the value of {name} contains a NUL byte.")
    return problems


def _check_text(value: Any, limit: int) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string."]
    if len(value) > limit:
        return [f"at most {limit} characters."]
    return []


def _check_flag(value: Any) -> list[str]:
    return [] if isinstance(value, bool) else ["must be true or false."]


CHECKS = {
    "name": _check_name,
    "description": lambda v: _check_text(v, MAX_DESCRIPTION),
    "parameters": _check_parameters,
    "command": _check_command,
    "working_dir": _check_working_dir,
    "timeout_seconds": _check_timeout,
    "env": _check_env,
    "enabled": _check_flag,
}


def check_tool(fields: Mapping[str, Any]) -> Errors:
    """Every problem of a tool's fields (each field present is checked), and the command's placeholders
    against the schema: each ``{{.key}}`` must be one of its properties."""
    errors: Errors = {}
    for field, check in CHECKS.items():
        if field in fields:
            problems = check(fields[field])
            if problems:
                errors[field] = problems
    command, parameters = fields.get("command"), fields.get("parameters")
    if "command" not in errors and "parameters" not in errors and isinstance(command, str):
        properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
        undefined = [name for name in rendering.placeholders(command) if name not in properties]
        if undefined:
            errors["command"] = [
                f"the placeholder {{{{.{undefined[0]}}}}} names no parameter; add {undefined[0]!r} to the "
                "parameters' properties."
            ]
    return errors
