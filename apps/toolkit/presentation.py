"""Tool definitions as model providers and MCP expect them, flat or as domain (STRAP) tools; and the
catalog as ``GET /api/v1/tools/catalog/`` and the dashboard show it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from apps.toolkit import strap
from apps.toolkit.registry import implemented
from apps.tools.catalog import ALIASES, CATALOG, COMPOSITE_ALIASES, COMPOSITE_GROUP, GROUPS, PROFILES

Format = Literal["openai", "anthropic", "mcp"]
Style = Literal["flat", "strap"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "mcp")
STYLES: tuple[Style, ...] = ("flat", "strap")


def runnable(names: Iterable[str]) -> list[str]:
    """The names whose implementation is part of this deployment."""
    done = implemented()
    return [name for name in names if name in done]


def plain_definitions(names: Iterable[str], style: Style) -> list[dict[str, Any]]:
    """``{"name", "description", "parameters"}`` per tool, sorted by name (stable for prompt caching)."""
    if style == "strap":
        return strap.definitions(names)
    return [
        {"name": name, "description": CATALOG[name].description, "parameters": CATALOG[name].parameters}
        for name in sorted(names)
    ]


def render(definitions: list[dict[str, Any]], fmt: Format) -> list[dict[str, Any]]:
    if fmt == "openai":
        return [{"type": "function", "function": d} for d in definitions]
    if fmt == "anthropic":
        return [
            {"name": d["name"], "description": d["description"], "input_schema": d["parameters"]}
            for d in definitions
        ]
    return [_mcp(d) for d in definitions]


# What an MCP tool definition carries besides name, description and input schema, when its server
# listed it (``apps.mcp_grants``): passed on as MCP names them.
_MCP_EXTRAS = (("title", "title"), ("output_schema", "outputSchema"), ("annotations", "annotations"))


def _mcp(definition: dict[str, Any]) -> dict[str, Any]:
    tool = {
        "name": definition["name"],
        "description": definition["description"],
        "inputSchema": definition["parameters"],
    }
    for key, wire in _MCP_EXTRAS:
        if key in definition:
            tool[wire] = definition[key]
    return tool


def catalog_document() -> dict[str, Any]:
    """Every built-in tool with its group, schema, capability and availability here; the groups, the
    group aliases, the profiles and the tool aliases."""
    done = implemented()
    return {
        "tools": [
            {
                "name": spec.name,
                "group": spec.group,
                "description": spec.description,
                "parameters": spec.parameters,
                "capability": spec.capability,
                "requires": list(spec.requires),
                "available": spec.name in done,
                "unavailable_reason": ""
                if spec.name in done
                else (spec.unavailable_reason or "not available"),
            }
            for spec in CATALOG.values()
        ],
        "groups": {name: list(members) for name, members in GROUPS.items()},
        "group_aliases": {alias: COMPOSITE_GROUP for alias in COMPOSITE_ALIASES},
        "profiles": {name: list(spec) for name, spec in PROFILES.items()},
        "aliases": dict(ALIASES),
    }
