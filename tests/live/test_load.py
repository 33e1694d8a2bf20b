"""The load bench's short version (``bench/load.py``, 5 minutes with ``python -m bench.load``): the same
mix of execute (a built-in tool and a real stdio MCP server), listing, MCP endpoint calls, board writes
and audit reads from eight clients, with websocket subscribers, against a real daphne and django-q2
cluster for 15 s. No request may fail, no answered tool call may lack its ``ToolCall`` row, and every
subscriber receives every task event."""

from __future__ import annotations

import pytest

from apps.mcp_grants import client
from bench import load
from tests.processes import LiveProcesses

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_short_mixed_load_has_no_errors_and_loses_nothing(live: LiveProcesses, tenant_a):
    raw, team_id = load.seed(tenant_a)
    manager = client.manager()  # seeding discovered the server's tools from this process
    manager.run(manager.close_all(), 30)
    live.qcluster()
    base = live.daphne()
    before = load.tool_call_rows(str(tenant_a.pk))
    outcome = load.run(load.Target(base, raw, team_id), seconds=15, clients=8, sockets=4)
    rows = load.tool_call_rows(str(tenant_a.pk)) - before
    summary = "\n".join(load.report(outcome, rows=rows, memory={}))
    assert outcome.error_count == 0, summary
    assert all(outcome.latencies[name] for name, _ in load.MIX), summary
    assert rows == outcome.tool_calls_answered, summary
    assert outcome.socket_events == [outcome.tasks_created] * 4, summary
