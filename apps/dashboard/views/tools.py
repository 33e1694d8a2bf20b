"""The tool catalog: every built-in tool by group, with its schema, capability and availability here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse
from django.shortcuts import render

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.tenants.roles import Role
from apps.toolkit.presentation import catalog_document
from apps.tools.catalog import COMPOSITE_GROUP, profile_tools

OTHER_GROUP = "other"


@dataclass(frozen=True)
class ParameterRow:
    name: str
    type: str
    required: bool
    description: str


def _type_of(schema: dict[str, Any]) -> str:
    """A JSON Schema type in words: ``array of string``, ``one of a, b``, ``object``."""
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_of(schema['items'])}"
    return str(kind)


def _constraints(schema: dict[str, Any]) -> str:
    """Bounds and default worth showing after the description, as a sentence (calls past them are refused)."""
    parts = []
    if "minimum" in schema and "maximum" in schema:
        parts.append(f"From {schema['minimum']} to {schema['maximum']}.")
    elif "minimum" in schema:
        parts.append(f"At least {schema['minimum']}.")
    elif "maximum" in schema:
        parts.append(f"At most {schema['maximum']}.")
    if "default" in schema:
        parts.append(f"Default {json.dumps(schema['default'])}.")
    return " ".join(parts)


def parameter_rows(parameters: dict[str, Any]) -> list[ParameterRow]:
    """The top-level properties of a tool's parameters schema, required ones first."""
    required = set(parameters.get("required", []))
    rows = []
    for name, schema in (parameters.get("properties") or {}).items():
        schema = schema if isinstance(schema, dict) else {}
        description = str(schema.get("description", ""))
        bounds = _constraints(schema)
        if bounds:
            description = f"{description} {bounds}" if description else bounds
        rows.append(ParameterRow(name, _type_of(schema), name in required, description))
    return sorted(rows, key=lambda r: not r.required)  # stable: schema order within each part


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def tool_catalog(request: DashboardRequest) -> HttpResponse:
    """The catalog grouped by group; groups, profiles (expanded) and aliases below it."""
    document = catalog_document()
    tools = []
    for tool in document["tools"]:
        tools.append(
            {
                **tool,
                "capability_label": tool["capability"].replace("_", "-"),
                "parameter_rows": parameter_rows(tool["parameters"]),
                "parameters_json": json.dumps(tool["parameters"], indent=2, sort_keys=True),
            }
        )
    groups: dict[str, list[dict[str, Any]]] = {}
    for tool in tools:
        groups.setdefault(tool["group"] or OTHER_GROUP, []).append(tool)
    group_names = sorted(groups, key=lambda g: (g == OTHER_GROUP, g))
    profiles = [
        {
            "name": name,
            "entries": entries,
            "tools": sorted(profile_tools(name)),
        }
        for name, entries in document["profiles"].items()
    ]
    available = sum(1 for tool in tools if tool["available"])
    return render(
        request,
        "dashboard/tools/catalog.html",
        {
            "groups": [(name, groups[name]) for name in group_names],
            "other_group": OTHER_GROUP,
            "composite": COMPOSITE_GROUP,
            "composite_aliases": sorted(document["group_aliases"]),
            "group_members": {name: members for name, members in document["groups"].items()},
            "profiles": profiles,
            "aliases": sorted(document["aliases"].items(), key=lambda item: item[0].lower()),
            "counts": {"total": len(tools), "available": available, "unavailable": len(tools) - available},
        },
    )
