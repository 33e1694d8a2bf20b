"""Rendering a custom tool's command template (SPEC Part A, B §4.2).

``{{.key}}`` is plain text replacement (not a template language): each placeholder becomes the
argument's value quoted for the shell as one single-quoted word (``'`` inside it written ``'\\''``), so
whatever an agent sends (quotes, ``$()``, backticks, ``;``, newlines) reaches the command as data.

All placeholders are replaced in one pass over the template. Replacing them one argument after the
other, as upstream did, expands placeholders that an earlier argument's *value* contained, and that
breaks the quoting: ``a = "{{.b}}"`` and ``b = "x'; evil; '"`` would run ``evil``.

A missing *required* argument is an error before anything runs; a missing optional one renders as
``''`` (an empty word), never as the literal placeholder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\.([A-Za-z_][A-Za-z0-9_]*)\}\}")


class RenderError(ValueError):
    """The command cannot be rendered with these arguments (the message is written for the LLM)."""


def shell_quote(value: str) -> str:
    """``value`` as one single-quoted shell word."""
    return "'" + value.replace("'", "'\\''") + "'"


def as_text(value: Any) -> str:
    """An argument's value as text: strings as they are, JSON literals as JSON (``true``, ``3``,
    ``["a","b"]``), so the command sees what the agent sent."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def placeholders(template: str) -> list[str]:
    """The argument names the template refers to, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


def render(template: str, args: Mapping[str, Any], *, required: Iterable[str] = ()) -> str:
    """The command with every placeholder replaced by its argument, shell-quoted (see module doc)."""
    used = placeholders(template)
    missing = [name for name in dict.fromkeys(required) if name not in args]
    if missing:
        raise RenderError(
            f"missing required argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}; "
            "call the tool again with them."
        )
    for name in used:
        if name in args and "\x00" in as_text(args[name]):
            raise RenderError(f"argument {name!r} contains a NUL byte; send plain text.")

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return shell_quote(as_text(args[name])) if name in args else "''"

    return PLACEHOLDER.sub(replace, template)
