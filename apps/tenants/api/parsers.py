"""The API's JSON parser: strict JSON, with the nesting bounded.

Refused with the malformed-JSON error (400), each with a message that says what to change:

- a body nested deeper than :data:`MAX_DEPTH` levels (Python's JSON decoder, and any code that walks
  the result recursively, would raise RecursionError, a 500);
- non-finite numbers: ``NaN``, ``Infinity``, ``-Infinity`` and numbers too large for a double (``1e999``,
  which would otherwise become Infinity), which neither JSON nor PostgreSQL's ``jsonb`` can hold;
- the NUL character (``\\u0000``) in an object key, which PostgreSQL text cannot hold (in a string
  value it is refused by field: the ``invalid`` error naming the top-level field that holds it);
- an object that names the same key twice (which value was meant is ambiguous).
"""

from __future__ import annotations

import codecs
import json
import math
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64


class _Refused(ValueError):
    pass


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels deep (iterative: never
    recurses itself)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number; send a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is too large; send a finite number")
    return value


def _object(pairs: list[tuple[str, Any]], *, allow_nul: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if "\x00" in key and not allow_nul:
            raise _Refused("an object key contains the NUL character (\\u0000), which is not allowed")
        if key in result:
            raise _Refused(f"duplicate key {key[:64]!r} in an object; name each key once")
        result[key] = value
    return result


def contains_nul(value: Any) -> bool:
    """Whether any string in ``value`` holds a NUL character (iterative; keys are checked as objects
    are built)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if "\x00" in current:
                return True
        elif isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            stack.extend(current.values())
    return False


def _object_with_nul(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return _object(pairs, allow_nul=True)


def loads(text: str, *, allow_nul: bool = False) -> Any:
    """Strict JSON as the API accepts it; raises ValueError with a message for a client."""
    hook = _object_with_nul if allow_nul else _object
    return json.loads(text, parse_constant=_constant, parse_float=_float, object_pairs_hook=hook)


def nul_path(value: Any) -> list[str | int] | None:
    """Where the first string holding a NUL character is in ``value`` (keys and indexes), or None."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        current, path = stack.pop()
        if isinstance(current, str):
            if "\x00" in current:
                return path
        elif isinstance(current, list):
            stack.extend((item, [*path, index]) for index, item in reversed(list(enumerate(current))))
        elif isinstance(current, dict):
            stack.extend((item, [*path, key]) for key, item in reversed(list(current.items())))
    return None


def strict_loads(text: str, *, allow_nul: bool = False, nul_values: bool = False) -> Any:
    """``text`` decoded under the API's JSON rules (also for JSON typed into a form); raises ValueError
    (``json.JSONDecodeError`` for malformed JSON) with a message for a client. ``nul_values`` leaves
    NUL characters in string values for the caller to refuse by field."""
    try:
        data = loads(text, allow_nul=allow_nul)
    except RecursionError:
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    if depth_exceeds(data, MAX_DEPTH):
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
    if not allow_nul and not nul_values and contains_nul(data):
        raise _Refused("a string contains the NUL character (\\u0000), which is not allowed")
    return data


def strict_json(text: str, *, allow_nul: bool = False, nul_values: bool = False) -> Any:
    """Decode ``text`` as :class:`BoundedJSONParser` does (for endpoints that read a body themselves);
    raises :class:`ParseError`."""
    try:
        return strict_loads(text, allow_nul=allow_nul, nul_values=nul_values)
    except ValueError as exc:
        raise ParseError(f"JSON parse error - {exc}") from None


class BoundedJSONParser(JSONParser):
    allow_nul = False

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        encoding = getattr(request, "encoding", None) or settings.DEFAULT_CHARSET
        try:
            text = codecs.getreader(encoding)(stream).read()
        except (LookupError, ValueError) as exc:  # an unknown charset, bytes that are not in it
            raise ParseError(f"JSON parse error - {exc}") from None
        data = strict_json(text, allow_nul=self.allow_nul, nul_values=True)
        path = None if self.allow_nul else nul_path(data)
        if path is not None:
            # The message DRF's own string fields give, with where the character is when it is deeper.
            where = ".".join(str(part) for part in path)
            field = str(path[0]) if path and isinstance(data, dict) else "non_field_errors"
            message = "Null characters are not allowed."
            if len(path) != 1:
                message = f"Null characters are not allowed (at {where or 'the body'})."
            raise ValidationError({field: [message]})
        return data


class ToolArgumentsJSONParser(BoundedJSONParser):
    """For the execute route: a NUL in a tool's arguments reaches the pipeline, which refuses the call
    as invalid and records it (with the NUL replaced)."""

    allow_nul = True
