"""Schemathesis hooks for the API fuzz run (loaded through ``SCHEMATHESIS_HOOKS``; the test writes the
file named by ``TOOLGATE_FUZZ_STATE`` before the run).

- **Objects to reach.** The test seeds real objects, each set in a tenant of its own with an owner key
  (the builders of the tenant-isolation test), and lists their path values by the operation's path
  template. A request to such an operation takes one seeded set of values and its key three times in
  five; otherwise it goes out as generated, with the run's main key.
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
    seeded = _seeded(template) if "{" in template else []
    with _LOCK:
        use_seeded = bool(seeded) and _CHOICE.random() < 0.6
        pick = _CHOICE.choice(seeded) if use_seeded else None
    if pick is not None:
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
