"""Where the board tells runners inside Toolgate what it tells external ones over the team's topic:
a task was dispatched to its owner (``task.dispatched``), or the owner's run on a task must stop
(``run.cancel``). Listeners register in their app's ``ready()``; each is called inside the board's
transaction and must only queue work after commit."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apps.teams.models import Task

Dispatched = Callable[["Task", dict[str, Any]], None]
CancelRuns = Callable[["Task", str], None]

_dispatched: list[Dispatched] = []
_cancel_runs: list[CancelRuns] = []


def on_dispatch(listener: Dispatched) -> None:
    if listener not in _dispatched:
        _dispatched.append(listener)


def on_cancel_runs(listener: CancelRuns) -> None:
    if listener not in _cancel_runs:
        _cancel_runs.append(listener)


def dispatched(task: Task, payload: dict[str, Any]) -> None:
    for listener in _dispatched:
        listener(task, payload)


def cancel_runs(task: Task, reason: str) -> None:
    for listener in _cancel_runs:
        listener(task, reason)
