"""Tool definitions as model providers and MCP expect them, flat or as domain (STRAP) tools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from apps.runtime import strap
from apps.toolkit.registry import implemented
from apps.tools.catalog import CATALOG

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
    return [
        {"name": d["name"], "description": d["description"], "inputSchema": d["parameters"]}
        for d in definitions
    ]
