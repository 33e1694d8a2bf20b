"""Timing and query counting of one endpoint through Django's in-process test client."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

WARMUP_REQUESTS = 30  # loads code paths and caches, and absorbs one-off writes (API key last_used_at)
QUERY_SAMPLES = 10


@dataclass(frozen=True)
class Endpoint:
    label: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    # Raises AssertionError when the response is not the one we mean to measure (a 401 is fast).
    check: Callable[[Any], None] = lambda response: None


@dataclass(frozen=True)
class Result:
    label: str
    requests: int
    seconds: float
    p50_ms: float
    p95_ms: float
    queries: tuple[int, int]  # min and max over QUERY_SAMPLES requests
    sample_sql: tuple[str, ...]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def mean_ms(self) -> float:
        return 1000 * self.seconds / self.requests

    def queries_text(self) -> str:
        low, high = self.queries
        return str(low) if low == high else f"{low}-{high}"


def _get(client: Client, endpoint: Endpoint) -> Any:
    response = client.get(endpoint.path, headers=endpoint.headers)
    if response.status_code != 200:
        raise AssertionError(f"{endpoint.label}: HTTP {response.status_code}: {response.content[:500]!r}")
    return response


def run(client: Client, endpoint: Endpoint, *, seconds: float) -> Result:
    """Warm up, check the answer, count queries, then time sequential requests for ``seconds``."""
    for _ in range(WARMUP_REQUESTS):
        _get(client, endpoint)
    endpoint.check(_get(client, endpoint))

    # Counted in a separate pass: capturing forces the debug cursor, which would skew the timings.
    counts: list[int] = []
    sample_sql: tuple[str, ...] = ()
    for _ in range(QUERY_SAMPLES):
        with CaptureQueriesContext(connection) as captured:
            _get(client, endpoint)
        counts.append(len(captured.captured_queries))
        sample_sql = tuple(q["sql"] for q in captured.captured_queries)

    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        before = time.perf_counter()
        _get(client, endpoint)
        after = time.perf_counter()
        latencies.append(after - before)
        if after >= deadline:
            break
    elapsed = time.perf_counter() - started

    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return Result(
        label=endpoint.label,
        requests=len(latencies),
        seconds=elapsed,
        p50_ms=1000 * cuts[49],
        p95_ms=1000 * cuts[94],
        queries=(min(counts), max(counts)),
        sample_sql=sample_sql,
    )


def connect_ms(samples: int = 30) -> float:
    """Median time for a request to get its database connection: taken from the process's pool
    (``DATABASE_POOL_MAX_SIZE``, the default), else opened anew. Paid by every request under daphne,
    which closes (returns) the connection after each one; the in-process client keeps its own."""
    times = []
    for _ in range(samples):
        connection.close()
        before = time.perf_counter()
        connection.ensure_connection()
        times.append(time.perf_counter() - before)
    return 1000 * statistics.median(times)
