"""Schemathesis hooks for the API fuzz run (loaded through ``SCHEMATHESIS_HOOKS``; the test writes the
file named by ``TOOLGATE_FUZZ_STATE`` before the run).

- **Objects to reach.** The test seeds a tenant with the role matrix's objects and an owner key, and the
  requests known to succeed on it (``seeded_pass.py``), deletes aside. One call in three to an operation
  with such a request takes it whole (path, query, body and key): the creates whose bodies must name
  other objects of the tenant (a channel's kind-specific fields, the server of an MCP access request, a
  team's members) are reached too. Otherwise, a call to an operation whose path names objects takes the
  path values and key of such a request three times in five, and goes out as generated, with the run's
  main key, the other times.
- **Objects to delete.** A DELETE takes, three times in five, a request known to succeed on tenants
  seeded for deletes alone (and never the objects above): no delete removes an object that other
  methods' calls use. Deletes of objects that hold others (an agent, a team, an MCP server, a CLI) have
  a tenant of their own, so that they never take the objects of the deletes below them.
- **First calls.** The first call of each operation with its own method is steered always (to a request
  known to succeed, or else to seeded path values): on a busy machine most operations get only one or
  two calls in the budget, and the random phases still reach them.
- **Keys the run cannot revoke.** A path value naming one of the run's keys (found through
  ``GET /api-keys/`` by the stateful phase) is replaced by an id that names nothing: the run keeps the
  rights it started with.
- **What was reached.** Every response's operation and status are appended to ``TOOLGATE_FUZZ_LOG``,
  from which the test counts the operations reached with a 2xx.
"""

from __future__ import annotations

import json
import os
import random
import threading
import uuid
from functools import cache
from typing import Any

import schemathesis

_LOCK = threading.Lock()
_CHOICE = random.Random(20)
_CALLED: set[str] = set()  # operations called with their own method so far


@cache
def _state() -> dict[str, Any]:
    with open(os.environ["TOOLGATE_FUZZ_STATE"]) as handle:
        state: dict[str, Any] = json.load(handle)
    return state


def _seeded(template: str) -> list[tuple[dict[str, str], str]]:
    return [(values, key) for values, key in _state()["seeded"].get(template, [])]


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    state = _state()
    key = state["key"]
    template = case.operation.path
    method = case.operation.method.upper()
    operation = f"{method} {template}"
    doomed = state["doomed"].get(operation, [])
    valid = state["valid"].get(operation, [])
    seeded = _seeded(template) if method != "DELETE" else []
    with _LOCK:
        first = case.method.upper() == method and operation not in _CALLED
        if first:
            _CALLED.add(operation)
        draw = 0.0 if first else _CHOICE.random()
        request = None
        if method == "DELETE" and doomed and draw < 0.6:
            request = _CHOICE.choice(doomed)
        elif valid and draw < 1 / 3:
            request = _CHOICE.choice(valid)
        steer = first or _CHOICE.random() < 0.6
        pick = _CHOICE.choice(seeded) if request is None and seeded and steer else None
    if request is not None:
        key = request["key"]
        case.path_parameters = {**(case.path_parameters or {}), **request["path"]}
        case.query = dict(request["query"])
        if request["body"] is not None:
            case.body = request["body"]
    elif pick is not None:
        values, key = pick
        case.path_parameters = {**(case.path_parameters or {}), **values}
    for name, value in list((case.path_parameters or {}).items()):
        if str(value) in state["protected"]:
            case.path_parameters[name] = str(uuid.uuid4())
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {key}"}


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    line = json.dumps(
        {
            "operation": f"{case.operation.method.upper()} {case.operation.path}",
            "method": case.method.upper(),
            "status": response.status_code,
        }
    )
    with _LOCK, open(os.environ["TOOLGATE_FUZZ_LOG"], "a") as handle:
        handle.write(line + "\n")
