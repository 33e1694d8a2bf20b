"""The metrics ``/metrics`` reads from the database at scrape time, across tenants (counts only):
approvals waiting for a human, MCP servers by status, django-q2's queue depth and stored failures.
Registered with ``apps.tenants.metrics`` from this app's ``ready()``."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from apps.mcp_grants.selectors import server_counts_by_status
from apps.policy.selectors import approvals_waiting_count
from apps.runtime.selectors import background_failures_stored, background_queue_depth


def collect() -> Iterator[GaugeMetricFamily]:
    yield GaugeMetricFamily(
        "toolgate_approvals_waiting",
        "Exec approvals pending a human's decision and not expired, all tenants.",
        value=approvals_waiting_count(),
    )
    servers = GaugeMetricFamily(
        "toolgate_mcp_servers",
        "Registered MCP servers by health status (disabled: switched off).",
        labels=["status"],
    )
    for status, count in sorted(server_counts_by_status().items()):
        servers.add_metric([status], count)
    yield servers
    yield GaugeMetricFamily(
        "toolgate_background_queue_depth",
        "django-q2 jobs in the queue (waiting, or taken and not yet acknowledged).",
        value=background_queue_depth(),
    )
    yield GaugeMetricFamily(
        "toolgate_background_failures_stored",
        "Failed django-q2 jobs kept in the database.",
        value=background_failures_stored(),
    )
