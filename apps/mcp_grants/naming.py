"""Registered names of MCP tools (B §3.3): ``ensure_prefix(prefix, server) + "__" + tool``.

An empty prefix becomes ``mcp_`` + the server name with ``-`` turned into ``_``; a prefix that does not
start with ``mcp_`` gets it. ``mcp_pg__query`` is the tool ``query`` of the server ``pg``.

A server registered with ``prefix_tools`` off (unprefixed) registers its tools under their own names:
``query`` is ``query``. Such a name says nothing of its server, so it is found by the exact discovered
name (:func:`parse` with ``unprefixed``); ``apps.mcp_grants.collisions`` keeps it unique in its tenant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

SEPARATOR = "__"
PREFIX = "mcp_"


class NamedServer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def tool_prefix(self) -> str: ...


def is_prefixed(server: NamedServer) -> bool:
    """Whether ``server``'s tools are registered as ``<prefix>__<tool>`` (the default)."""
    return bool(getattr(server, "prefix_tools", True))


S = TypeVar("S", bound=NamedServer)


def ensure_prefix(prefix: str, server_name: str) -> str:
    if not prefix:
        return PREFIX + server_name.replace("-", "_")
    if not prefix.startswith(PREFIX):
        return PREFIX + prefix
    return prefix


def server_prefix(server: NamedServer) -> str:
    return ensure_prefix(server.tool_prefix, server.name)


def registered_prefix(server: NamedServer) -> str:
    """The prefix of the server's registered names; ``""`` for an unprefixed server."""
    return server_prefix(server) if is_prefixed(server) else ""


def registered_name(server: NamedServer, tool: str) -> str:
    if not is_prefixed(server):
        return tool
    return server_prefix(server) + SEPARATOR + tool


def parse(name: str, servers: Iterable[S], unprefixed: Mapping[str, S] | None = None) -> tuple[S, str] | None:
    """The server and original tool name behind a registered name, or None. ``unprefixed`` maps the
    discovered tool names of unprefixed servers to their server: such a name is that server's tool, as
    is (collisions are never registered, so it names one tool). Otherwise the longest matching prefix of
    a prefixed server wins, so ``mcp_a__b__c`` with servers ``a`` and ``a__b`` names ``c`` of ``a__b``."""
    if unprefixed and name in unprefixed:
        return unprefixed[name], name
    best: tuple[S, str] | None = None
    best_len = -1
    for server in servers:
        if not is_prefixed(server):
            continue
        head = server_prefix(server) + SEPARATOR
        if name.startswith(head) and len(name) > len(head) and len(head) > best_len:
            best, best_len = (server, name[len(head) :]), len(head)
    return best


def split(name: str) -> tuple[str, str] | None:
    """``(prefix, tool)`` of a prefixed registered name, split at its first ``__`` (server names and
    prefixes never contain one), or None when ``name`` has not that form (an unprefixed server's tool
    has not: it is known by its exact name only)."""
    if not name.startswith(PREFIX):
        return None
    prefix, sep, tool = name.partition(SEPARATOR)
    if not sep or not tool or prefix == PREFIX:
        return None
    return prefix, tool
