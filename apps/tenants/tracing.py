"""OpenTelemetry traces: off unless configured, exported over OTLP (HTTP) when on.

``TOOLGATE_TRACING`` (on by itself when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set) makes this app's ``ready()`` call :func:`start`: a tracer
provider with a batching OTLP/HTTP exporter (which reads the standard ``OTEL_EXPORTER_OTLP_*``
variables), Django's requests (opentelemetry-instrumentation-django), every SQL statement on a psycopg
connection opened after it (opentelemetry-instrumentation-psycopg: Django's connections and its pool's,
and the PostgreSQL channel layer's; a span per statement, without its parameters), and outbound HTTP
(opentelemetry-instrumentation-httpx: httpx's own transports, and the SSRF-guarded clients through
:func:`instrument_httpx_client`, as their transport is not one it patches); outbound requests carry
``traceparent``. ``ready()`` runs before any connection is opened. A connection opened before
:func:`start` stays untraced: ``start`` closes the calling thread's idle Django connections, which then
reopen traced unless a pool hands the same connection back.

Off, nothing of OpenTelemetry's SDK is imported and :func:`span` returns one shared no-op context
manager: the pipeline's stage spans cost a function call and a global read.

The pipeline (``apps.runtime.pipeline``) opens a span per stage. An MCP tool's call runs on the MCP
client's event loop (``apps.mcp_grants.client``), scheduled with ``run_coroutine_threadsafe``, which
carries the calling thread's context there: the MCP SDK's client span is a child of the pipeline's
``toolgate.tool`` span, and the SDK puts that trace into the request's ``_meta``
(``traceparent``/``tracestate``, the MCP specification's trace-context convention).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import connections

_NOOP: AbstractContextManager[Any] = nullcontext()
_tracer: Any = None
_instrumented: list[Any] = []


def enabled() -> bool:
    return _tracer is not None


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span named ``name`` around the ``with`` block, child of the current one (a no-op when off)."""
    if _tracer is None:
        return _NOOP
    return _tracer.start_as_current_span(name, attributes=attributes or None)  # type: ignore[no-any-return]


def instrument_httpx_client(client: Any) -> Any:
    """Trace ``client``'s requests and send ``traceparent`` with them (when on); returns ``client``."""
    if _tracer is not None:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor.instrument_client(client)
    return client


def start(*, processor: Any = None) -> None:
    """Install the tracer provider and the instrumentations, once per process. ``processor`` replaces the
    OTLP exporter (the tests' in-memory one)."""
    global _tracer
    if _tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # a provider is set once per process
        service = os.environ.get("OTEL_SERVICE_NAME", "").strip() or "toolgate"
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        trace.set_tracer_provider(provider)
    if processor is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    for instrumentor in (DjangoInstrumentor(), HTTPXClientInstrumentor(), PsycopgInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)
            _instrumented.append(instrumentor)
    _reopen_idle_connections()
    _tracer = provider.get_tracer("toolgate")


def stop() -> None:
    """Stop tracing in this process (the tests turn it off again); spans already open still end."""
    global _tracer
    _tracer = None
    while _instrumented:
        _instrumented.pop().uninstrument()
    _reopen_idle_connections()


def _reopen_idle_connections() -> None:
    """Close this thread's open Django connections that are outside a transaction: psycopg's
    instrumentation applies to connections opened after it is switched on or off, and these reopen at
    their next query. One inside a transaction stays as it was."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()
