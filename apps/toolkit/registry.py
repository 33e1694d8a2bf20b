"""Implementations of catalog tools, registered by name. A catalog tool without one is "unavailable"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apps.toolkit.context import CallContext
from apps.toolkit.results import ToolResult

ToolFunction = Callable[[CallContext, dict[str, Any]], ToolResult]

_IMPLEMENTATIONS: dict[str, ToolFunction] = {}


def tool(name: str) -> Callable[[ToolFunction], ToolFunction]:
    """Register the implementation of catalog tool ``name`` (one per name)."""

    def register(function: ToolFunction) -> ToolFunction:
        if name in _IMPLEMENTATIONS:
            raise ValueError(f"tool {name!r} is already implemented by {_IMPLEMENTATIONS[name]!r}")
        _IMPLEMENTATIONS[name] = function
        return function

    return register


def implementation(name: str) -> ToolFunction | None:
    return _IMPLEMENTATIONS.get(name)


def implemented() -> frozenset[str]:
    return frozenset(_IMPLEMENTATIONS)
