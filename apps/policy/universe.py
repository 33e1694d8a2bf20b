"""The tools a policy can name: the built-in catalog plus tools that later layers add at run time (MCP
servers' tools, custom tools), with their groups.

Such a layer registers a *source* (``register_source``): a function of (tenant, agent, user id) that
returns the names it contributes and the groups it defines (``mcp``, ``mcp:<server>``, …). With
``agent=None`` it returns everything the tenant has (what a policy may name when it is saved); with an
agent, what that agent (and user) can reach (what the engine filters). Sources must be cheap and must
read only the database state the tenant's ``config_version`` covers, so that the engine's cache stays
exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from apps.tools.catalog import CATALOG, COMPOSITE_ALIASES, COMPOSITE_GROUP, GROUPS, PROFILES

if TYPE_CHECKING:
    from apps.tenants.models import Agent, Tenant

Source = Callable[["Tenant", "Agent | None", str], tuple[Iterable[str], Mapping[str, Iterable[str]]]]
_SOURCES: list[Source] = []


def register_source(source: Source) -> Source:
    """Add a source of tools (idempotent; usable as a decorator)."""
    if source not in _SOURCES:
        _SOURCES.append(source)
    return source


def is_pattern(name: str) -> bool:
    return "*" in name


@dataclass(frozen=True)
class Universe:
    names: tuple[str, ...]  # sorted
    groups: Mapping[str, frozenset[str]]  # without the "group:" prefix

    def group(self, name: str) -> frozenset[str] | None:
        if name in COMPOSITE_ALIASES:
            name = COMPOSITE_GROUP
        return self.groups.get(name)

    def expand(self, specs: Iterable[str]) -> set[str]:
        """Names of the universe that ``specs`` select: ``group:<name>`` (an unknown group selects
        nothing), ``*`` patterns (case-sensitive, like the names), and names (an unknown one selects
        nothing: a tool may disappear after the policy was saved)."""
        result: set[str] = set()
        names = set(self.names)
        for spec in specs:
            if spec.startswith("group:"):
                result |= self.group(spec[len("group:") :]) or frozenset()
            elif is_pattern(spec):
                pattern = _pattern(spec)
                result.update(n for n in self.names if pattern.match(n))
            elif spec in names:
                result.add(spec)
        return result

    def profile(self, name: str) -> set[str]:
        """The tools a profile allows (``full``, empty and unknown profiles: all of them)."""
        spec = PROFILES.get(name)
        if not spec:
            return set(self.names)
        return self.expand(spec)


@lru_cache(maxsize=1024)
def _pattern(spec: str) -> re.Pattern[str]:
    """Only ``*`` is special in a policy pattern (any run of characters); everything else, ``?`` and
    ``[`` included, matches itself."""
    return re.compile(".*".join(re.escape(part) for part in spec.split("*")) + r"\Z", re.DOTALL)


@cache
def _builtin_groups() -> dict[str, frozenset[str]]:
    return {name: frozenset(members) for name, members in GROUPS.items()}


def universe_for(tenant: Tenant, agent: Agent | None = None, user_id: str = "") -> Universe:
    """The universe of ``agent`` (and user) in ``tenant``, or of the whole tenant when ``agent`` is None."""
    names = set(CATALOG)
    groups = dict(_builtin_groups())
    for source in _SOURCES:
        extra_names, extra_groups = source(tenant, agent, user_id)
        names.update(extra_names)
        for group, members in extra_groups.items():
            groups[group] = groups.get(group, frozenset()) | frozenset(members)
    if _SOURCES:
        # The composite group is every native tool; dynamic groups do not join it.
        groups[COMPOSITE_GROUP] = _builtin_groups()[COMPOSITE_GROUP]
    return Universe(names=tuple(sorted(names)), groups=groups)
