"""Prometheus metrics: what every process records, and ``/metrics``, which serves them to scrapers.

Every process (daphne, the django-q2 cluster and its workers) records into files under
``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode; the settings set the variable
before this module imports prometheus_client, and ``config.metrics.prepare_multiprocess_dir`` empties
the directory before the processes start). ``/metrics`` adds up every process's files, and adds what
is read from the database at scrape time: the layers above register those collectors from their
``ready()`` (:func:`register_collector`), as this module sits at the bottom of the layers.

Labels are bounded: HTTP requests by route pattern (never the raw path), method and status class; tool
calls by the catalog's tool name, or for tools outside the catalog (MCP, custom tools) a label the
gateway derives from the server or tool, at most ``TOOLGATE_METRICS_EXTERNAL_TOOL_LABEL_MAX`` of them
per process (then ``other``); the tenant's slug only when ``TOOLGATE_METRICS_TENANT_LABEL`` is on, for
at most ``TOOLGATE_METRICS_TENANT_LABEL_MAX`` tenants per process (then ``other``).

``/metrics`` answers only a request carrying ``TOOLGATE_METRICS_TOKEN`` as a bearer token (compared in
constant time) or coming from an address in ``TOOLGATE_METRICS_ALLOW_NETS``; everyone else, tenants'
keys and dashboard sessions included, gets the same 404 as an unknown URL.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import Http404, HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

ENABLED: bool = bool(getattr(settings, "TOOLGATE_METRICS", False)) and bool(
    os.environ.get("PROMETHEUS_MULTIPROC_DIR")
)

if ENABLED:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
    from prometheus_client.core import Metric
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

OTHER = "other"
UNRESOLVED = "unresolved"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds: HTTP requests and tool calls last from a millisecond to the approval timeout (2 minutes).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))
_TENANT_LABEL: bool = bool(getattr(settings, "TOOLGATE_METRICS_TENANT_LABEL", False))


class BoundedLabels:
    """The first ``limit`` distinct values seen keep their name; any later one is ``other``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)
        return value


_tenants = BoundedLabels(int(getattr(settings, "TOOLGATE_METRICS_TENANT_LABEL_MAX", 20)))
_external_tools = BoundedLabels(int(getattr(settings, "TOOLGATE_METRICS_EXTERNAL_TOOL_LABEL_MAX", 50)))

if ENABLED:
    _tool_labels = ["tool", "decision", "outcome", *(["tenant"] if _TENANT_LABEL else [])]
    HTTP_DURATION = Histogram(
        "toolgate_http_request_duration_seconds",
        "HTTP requests by route pattern, method and status class, and how long they took.",
        ["route", "method", "status"],
        buckets=_BUCKETS,
    )
    TOOL_CALLS = Counter(
        "toolgate_tool_calls",
        "Tool calls through the pipeline by tool, decision and outcome (ok or error).",
        _tool_labels,
    )
    TOOL_DURATION = Histogram(
        "toolgate_tool_call_duration_seconds",
        "How long tool calls took in the pipeline (from the call to its record).",
        _tool_labels,
        buckets=_BUCKETS,
    )
    WEBSOCKETS_OPEN = Gauge(
        "toolgate_websocket_connections",
        "Open event websockets (/ws/events/) of live processes.",
        multiprocess_mode="livesum",
    )
    WEBSOCKETS_OPENED = Counter("toolgate_websocket_connections_opened", "Event websockets accepted.")
    DB_POOL = Gauge(
        "toolgate_db_pool_connections",
        "Database connection pools of live processes: connections open (size), idle (available), the "
        "most allowed (max), and requests waiting for one (waiting).",
        ["state"],
        multiprocess_mode="livesum",
    )
    BACKGROUND_JOBS = Counter(
        "toolgate_background_jobs",
        "django-q2 jobs finished, by function and outcome (success or failure).",
        ["func", "outcome"],
    )


def tool_label(name: str, *, builtin: bool) -> str:
    """The ``tool`` label of a call: a catalog tool's name, else a bounded label of an external tool."""
    if not name:
        return UNRESOLVED
    return name if builtin else _external_tools(name[:100])


def tool_call(*, tool: str, decision: str, error: bool, seconds: float, tenant: str) -> None:
    """One finished tool call (the pipeline's record step); ``tool`` is a :func:`tool_label`."""
    if not ENABLED:
        return
    labels = [tool, decision, "error" if error else "ok"]
    if _TENANT_LABEL:
        labels.append(_tenants(tenant))
    TOOL_CALLS.labels(*labels).inc()
    TOOL_DURATION.labels(*labels).observe(seconds)


def websocket_opened() -> None:
    if ENABLED:
        WEBSOCKETS_OPEN.inc()
        WEBSOCKETS_OPENED.inc()


def websocket_closed() -> None:
    if ENABLED:
        WEBSOCKETS_OPEN.dec()


def background_job(*, func: str, success: bool) -> None:
    if ENABLED:
        BACKGROUND_JOBS.labels(func[:200], "success" if success else "failure").inc()


_POOL_SAMPLE_SECONDS = 1.0
_pool_sampled = 0.0


def sample_pool(*, force: bool = False) -> None:
    """Record this process's database pool use (at most once a second unless ``force``)."""
    global _pool_sampled
    now = time.monotonic()
    if not ENABLED or (not force and now - _pool_sampled < _POOL_SAMPLE_SECONDS):
        return
    _pool_sampled = now
    try:
        pool = getattr(connections["default"], "pool", None)
    except Exception:  # no pool configured, or the database is unusable: nothing to sample
        pool = None
    if pool is None:
        return
    stats = pool.get_stats()
    DB_POOL.labels("size").set(stats.get("pool_size", 0))
    DB_POOL.labels("available").set(stats.get("pool_available", 0))
    DB_POOL.labels("max").set(stats.get("pool_max", 0))
    DB_POOL.labels("waiting").set(stats.get("requests_waiting", 0))


# --- HTTP ---------------------------------------------------------------------------------------------


class MetricsMiddleware:
    """Times every request by its route pattern (``api/v1/agents/<str:key>/``, never the raw path),
    method and status class, and samples the process's database pool."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not ENABLED:
            return self.get_response(request)
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = _route(match.route) if match is not None else "unmatched"
        method = request.method if request.method in _METHODS else OTHER
        HTTP_DURATION.labels(route, method, f"{response.status_code // 100}xx").observe(
            time.perf_counter() - started
        )
        sample_pool()
        return response


async def timed_asgi(app: Any, route: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Run the ASGI ``app`` (an HTTP endpoint outside Django's URLconf: the MCP endpoint) and time it
    like :class:`MetricsMiddleware` does a Django view, under ``route``."""
    if not ENABLED:
        await app(scope, receive, send)
        return
    started = time.perf_counter()
    status = 500

    async def sending(message: dict[str, Any]) -> None:
        nonlocal status
        if message.get("type") == "http.response.start":
            status = int(message.get("status", 500))
        await send(message)

    try:
        await app(scope, receive, sending)
    finally:
        method = scope.get("method")
        HTTP_DURATION.labels(route, method if method in _METHODS else OTHER, f"{status // 100}xx").observe(
            time.perf_counter() - started
        )


_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")


@cache
def _route(pattern: str) -> str:
    """A route pattern as a label: a router's regular expression (``api/v1/agents/(?P<key>[^/]+)/$``)
    reads like a path pattern (``api/v1/agents/<key>/``)."""
    return _GROUP.sub(r"<\1>", pattern).replace("^", "").replace("$", "") or "/"


# --- Scrape -------------------------------------------------------------------------------------------

_collectors: list[Callable[[], Iterable[Any]]] = []


def register_collector(collect: Callable[[], Iterable[Any]]) -> None:
    """Add metric families computed at scrape time (read from the database, for instance)."""
    if collect not in _collectors:
        _collectors.append(collect)


class _ScrapeTime:
    def collect(self) -> Iterable[Metric]:
        for collect in _collectors:
            try:
                yield from collect()
            except Exception:  # one failing source must not hide every other metric
                logger.exception("metrics collector %s failed", getattr(collect, "__name__", collect))


def _drop_dead_processes(path: Path) -> None:
    """Remove the live gauges of processes that no longer exist (a crash, or a supervisor that did not
    report the exit)."""
    for file in path.glob("gauge_live*_*.db"):
        try:
            pid = int(file.stem.rsplit("_", 1)[1])
        except ValueError:
            continue
        if not _alive(pid):
            multiprocess.mark_process_dead(pid, str(path))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exposition() -> bytes:
    """Every process's metrics and the scrape-time ones, in Prometheus' text format."""
    path = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    sample_pool(force=True)
    _drop_dead_processes(path)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(path))  # type: ignore[no-untyped-call]
    registry.register(_ScrapeTime())  # type: ignore[arg-type]
    return bytes(generate_latest(registry))


@cache
def _networks(nets: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(net, strict=False) for net in nets)


def scraper_allowed(request: HttpRequest) -> bool:
    """Whether ``request`` comes from a configured scraper: its bearer token, or its peer address."""
    if not ENABLED:
        return False
    token = str(getattr(settings, "TOOLGATE_METRICS_TOKEN", "") or "")
    header = request.headers.get("Authorization", "")
    if (
        token
        and header[:7].lower() == "bearer "
        and hmac.compare_digest(header[7:].strip().encode(), token.encode())
    ):
        return True
    nets = tuple(getattr(settings, "TOOLGATE_METRICS_ALLOW_NETS", ()) or ())
    if nets:
        try:
            peer = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            return False
        return any(peer in net for net in _networks(nets))
    return False


def view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics`` for scrapers; the same 404 as an unknown URL for anyone else."""
    if request.method not in {"GET", "HEAD"} or not scraper_allowed(request):
        raise Http404
    response = HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
