"""OpenTelemetry traces of tool calls, read from an in-memory exporter: one execute shows each pipeline
stage as a span under the request's, the wait for an approval is a span, and the trace follows the call
out: an MCP server sees ``traceparent`` in its request's ``_meta``, and web_fetch's request carries the
``traceparent`` header. Off (the default), the pipeline records no span."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connections
from django.test import override_settings
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from apps.accounts import services as tenant_services
from apps.mcp_grants import client, services
from apps.policy import services as policy_services
from apps.runtime import ratelimit
from apps.tenants import tracing
from apps.tenants.actors import Actor
from apps.tenants.roles import Role
from tests import factories
from tests.local_http import serving

TRACED = Path(__file__).resolve().parent.parent / "mcp" / "servers" / "traced.py"
PUBLIC_IP = "127.0.0.2"
STAGES = [
    "toolgate.resolve",
    "toolgate.policy",
    "toolgate.approval",
    "toolgate.safeguard",
    "toolgate.rate_limit",
    "toolgate.arguments",
    "toolgate.tool",
    "toolgate.scrub",
    "toolgate.record",
]


def _fresh_pool() -> None:
    # psycopg's instrumentation applies to connections opened after it is switched on (or off): the
    # pool's open ones are dropped, as a process starting with tracing on has none yet, and so are the
    # rate limit's own connections (one per thread, outside Django's): one opened while tracing was on
    # would go on sending spans after it is off.
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()
            connection.close_pool()  # type: ignore[attr-defined]  # the PostgreSQL backend's
    ratelimit.close_connections()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.start(processor=SimpleSpanProcessor(exporter))
    _fresh_pool()
    try:
        yield exporter
    finally:
        tracing.stop()
        _fresh_pool()
        exporter.clear()


def _execute(client_, tool: str, args: dict) -> dict:
    response = client_.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": tool, "args": args}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def mcp_connections() -> Iterator[client.Manager]:
    """This process's MCP connection manager, emptied after the test (its stdio servers stopped)."""
    mgr = client.manager()
    yield mgr
    mgr.run(mgr.close_all(), 60)


@pytest.fixture
def member(tenant_a):
    tenant_services.agent_create(actor=Actor.system(tenant_a), key="bot", name="Bot")
    return factories.key_client(factories.make_api_key(tenant_a, Role.MEMBER))


@pytest.mark.django_db(transaction=True)  # the connection opens after tracing starts, as in a process
def test_one_execute_shows_each_pipeline_stage_as_a_span(spans, member):
    _execute(member, "datetime", {})
    finished = spans.get_finished_spans()
    by_name = {span.name: span for span in finished}
    root = by_name["toolgate.call"]
    # every stage, once, in order, each a child of the call's span
    stages = [span for span in finished if span.name in STAGES]
    assert [span.name for span in sorted(stages, key=lambda s: s.start_time)] == STAGES
    for span in stages:
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id, span.name
        assert span.context.trace_id == root.context.trace_id
    # the call is a child of the request's server span (Django's instrumentation)
    server = next(span for span in finished if span.kind == SpanKind.SERVER)
    assert root.parent is not None
    assert root.parent.span_id == server.context.span_id
    assert root.attributes["toolgate.decision"] == "allowed"
    assert root.attributes["toolgate.tool"] == "datetime"
    # the record's SQL is traced, under the record step, without the statement's parameters (the row
    # and its live event are one INSERT in a data-modifying WITH, named after its first word)
    record = by_name["toolgate.record"]
    inserts = [
        span
        for span in finished
        if span.name in {"INSERT", "WITH"}
        and span.parent is not None
        and span.parent.span_id == record.context.span_id
    ]
    assert inserts
    for span in inserts:  # opentelemetry-instrumentation-psycopg's attributes (its default conventions)
        assert span.attributes["db.system"] == "postgresql"
        assert span.attributes["db.statement"].startswith(("INSERT INTO", "WITH written AS (INSERT INTO"))
        assert not any("parameters" in name for name in span.attributes)

    # a call refused at the policy step says so on its own span too
    spans.clear()
    _execute(member, "no_such_tool", {})
    refused = next(span for span in spans.get_finished_spans() if span.name == "toolgate.call")
    assert refused.attributes["toolgate.decision"] == "unknown"


@pytest.mark.django_db
@override_settings(TOOLGATE_APPROVAL_TIMEOUT_SECONDS=1)
def test_the_wait_for_an_approval_is_a_span(spans, member, tenant_a):
    policy_services.policy_save(
        Actor.system(tenant_a), policy_services.target("tenant"), {"execApproval": {"ask": "always"}}
    )
    outcome = _execute(member, "exec", {"command": "echo hi"})
    assert "timed out" in json.dumps(outcome)
    names = [span.name for span in spans.get_finished_spans()]
    assert "toolgate.approval" in names
    assert "toolgate.approval_wait" in names
    assert "toolgate.resume" in names


@pytest.mark.django_db
def test_tracing_off_records_no_span(member):
    exporter = InMemorySpanExporter()
    tracing.start(processor=SimpleSpanProcessor(exporter))
    tracing.stop()
    _execute(member, "datetime", {})
    finished = exporter.get_finished_spans()
    assert finished == (), [(span.name, span.attributes) for span in finished]
    assert not tracing.enabled()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("mcp_connections")
def test_an_mcp_call_carries_the_trace_in_its_meta(spans, tenant_a, member):
    system = Actor.system(tenant_a)
    agent = tenant_services.agent_create(actor=system, key="traced-bot", name="Traced")
    server = services.server_create(
        actor=system, name="traced", transport="stdio", command=sys.executable, args=[str(TRACED), "stdio"]
    )
    services.agent_grant_set(actor=system, server=server, agent=agent)
    client.refresh(server)
    response = member.post(
        "/api/v1/runtime/execute",
        {"agent": "traced-bot", "tool": "mcp_traced__request_meta", "args": {}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    meta = json.loads(body["for_llm"])
    tool_span = next(span for span in spans.get_finished_spans() if span.name == "toolgate.tool")
    version, trace_id, parent_id, _flags = meta["traceparent"].split("-")
    assert version == "00"
    assert int(trace_id, 16) == tool_span.context.trace_id
    # the parent is the MCP SDK's client span, itself a child of the pipeline's tool step
    sent = next(span for span in spans.get_finished_spans() if span.name.startswith("MCP send tools/call"))
    assert int(parent_id, 16) == sent.context.span_id
    assert sent.parent is not None
    assert sent.parent.span_id == tool_span.context.span_id


@pytest.mark.django_db
def test_web_fetch_sends_traceparent(spans, member, settings):
    settings.TOOLGATE_SSRF_ALLOW_NETS = f"{PUBLIC_IP}/32"
    with serving(PUBLIC_IP) as site:
        site.routes["/page"] = lambda handler: handler.reply(200, b"hello", content_type="text/plain")
        outcome = _execute(member, "web_fetch", {"url": f"http://{PUBLIC_IP}:{site.port}/page"})
    assert "hello" in json.dumps(outcome)
    hit = next(hit for hit in site.hits if hit.path == "/page")
    tool_span = next(span for span in spans.get_finished_spans() if span.name == "toolgate.tool")
    _, trace_id, _, _ = hit.headers["traceparent"].split("-")
    assert int(trace_id, 16) == tool_span.context.trace_id


@pytest.mark.django_db(transaction=True)
def test_the_channel_layer_statements_are_traced_too(spans):
    # The PostgreSQL channel layer opens its own psycopg connections (an async pool per event loop),
    # outside Django's: the psycopg instrumentation traces them as well.
    layer = get_channel_layer()
    async_to_sync(layer.group_send)("tracing-probe", {"type": "probe.event"})
    statements = [
        span.attributes.get("db.statement", "")
        for span in spans.get_finished_spans()
        if span.attributes.get("db.system") == "postgresql"
    ]
    assert any("channels_postgres" in statement for statement in statements), statements
