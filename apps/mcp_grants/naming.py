"""Registered names of MCP tools (B §3.3): ``ensure_prefix(prefix, server) + "__" + tool``.

An empty prefix becomes ``mcp_`` + the server name with ``-`` turned into ``_``; a prefix that does not
start with ``mcp_`` gets it. ``mcp_pg__query`` is the tool ``query`` of the server ``pg``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

SEPARATOR = "__"
PREFIX = "mcp_"


class NamedServer(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def tool_prefix(self) -> str: ...


S = TypeVar("S", bound=NamedServer)


def ensure_prefix(prefix: str, server_name: str) -> str:
    if not prefix:
        return PREFIX + server_name.replace("-", "_")
    if not prefix.startswith(PREFIX):
        return PREFIX + prefix
    return prefix


def server_prefix(server: NamedServer) -> str:
    return ensure_prefix(server.tool_prefix, server.name)


def registered_name(server: NamedServer, tool: str) -> str:
    return server_prefix(server) + SEPARATOR + tool


def parse(name: str, servers: Iterable[S]) -> tuple[S, str] | None:
    """The server and original tool name behind a registered name, or None. The longest matching
    prefix wins, so ``mcp_a__b__c`` with servers ``a`` and ``a__b`` names ``c`` of ``a__b``."""
    best: tuple[S, str] | None = None
    best_len = -1
    for server in servers:
        head = server_prefix(server) + SEPARATOR
        if name.startswith(head) and len(name) > len(head) and len(head) > best_len:
            best, best_len = (server, name[len(head) :]), len(head)
    return best


def split(name: str) -> tuple[str, str] | None:
    """``(prefix, tool)`` of a registered name, split at its first ``__`` (server names and prefixes
    never contain one), or None when ``name`` is no MCP tool name."""
    if not name.startswith(PREFIX):
        return None
    prefix, sep, tool = name.partition(SEPARATOR)
    if not sep or not tool or prefix == PREFIX:
        return None
    return prefix, tool
