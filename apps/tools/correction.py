"""Hints for tool names a model made up: the tool it probably meant, and how to call it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# name a model tends to invent -> (our tool, how to call it)
_HINTS: dict[str, tuple[str, str]] = {}


def _hint(tool: str, call: str, *names: str) -> None:
    for name in names:
        _HINTS[name.lower()] = (tool, call)


_hint(
    "web_search", 'web_search(query: "...")', "websearch", "search_web", "google", "bing", "internet_search"
)
_hint(
    "web_fetch",
    'web_fetch(url: "...")',
    "webfetch",
    "fetch",
    "fetch_url",
    "curl",
    "http_get",
    "browse",
    "open_url",
    "get_url",
)
_hint("read_file", 'read_file(path: "...")', "read", "cat", "open_file", "view", "view_file", "readfile")
_hint(
    "write_file", 'write_file(path: "...", content: "...")', "write", "create_file", "save_file", "writefile"
)
_hint(
    "edit",
    'edit(path: "...", old_string: "...", new_string: "...")',
    "str_replace",
    "replace",
    "apply_patch",
    "patch",
    "modify_file",
    "update_file",
)
_hint(
    "search", 'search(pattern: "...", path: "...")', "grep", "rg", "ripgrep", "find_in_files", "search_files"
)
_hint("glob", 'glob(pattern: "**/*.py")', "find", "find_files", "glob_files")
_hint("list_files", 'list_files(path: ".")', "ls", "dir", "list", "list_dir", "list_directory")
_hint(
    "exec",
    'exec(command: "...")',
    "shell",
    "sh",
    "run",
    "run_command",
    "execute",
    "terminal",
    "cmd",
    "run_shell",
    "execute_command",
)
_hint("datetime", 'datetime(timezone: "UTC")', "time", "now", "date", "clock", "get_time", "current_time")

# The same hints for the domain (STRAP) presentation.
_STRAP_CALLS: dict[str, str] = {
    "web_search": 'web(action: "search", query: "...")',
    "web_fetch": 'web(action: "fetch", url: "...")',
    "read_file": 'file(action: "read", path: "...")',
    "write_file": 'file(action: "write", path: "...", content: "...")',
    "edit": 'file(action: "edit", path: "...", old_string: "...", new_string: "...")',
    "search": 'file(action: "grep", pattern: "...", path: "...")',
    "glob": 'file(action: "glob", pattern: "...")',
    "list_files": 'file(action: "list", path: ".")',
    "exec": 'shell(resource: "bash", action: "exec", command: "...")',
    "datetime": 'agent(resource: "time", action: "now")',
}


def correction(name: str, available: Iterable[str], *, strap: bool = False) -> str:
    """A sentence for the model: what to call instead of ``name``, and similar available names."""
    available = sorted(set(available))
    parts: list[str] = []
    hint = _HINTS.get(name.lower())
    if hint is not None and hint[0] in available:
        call = _STRAP_CALLS.get(hint[0], hint[1]) if strap else hint[1]
        parts.append(f"INSTEAD USE: {call}")
    close = difflib.get_close_matches(name, available, n=3, cutoff=0.6)
    close += [a for a in available if a.lower() == name.lower() and a not in close]
    if close:
        parts.append("Did you mean: " + ", ".join(close) + "?")
    return " ".join(parts)
