"""The audit log and the tool-call log as CSV or NDJSON, streamed row by row.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a
formula, so such a cell is written with a leading ``'`` (formula injection). An export holds at most
``EXPORT_LIMIT`` rows; when more matched, a last line says it was cut.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone

from apps.audit.models import AuditEvent, ToolCall

EXPORT_LIMIT = 100_000
CHUNK_SIZE = 2000  # rows fetched from the database at a time
ROWS_PER_CHUNK = 100  # rows sent in one chunk of the response
FORMATS = {"csv": "text/csv; charset=utf-8", "ndjson": "application/x-ndjson"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

AUDIT_COLUMNS = [
    "id",
    "created_at",
    "actor_kind",
    "actor_id",
    "actor_label",
    "verb",
    "target_type",
    "target_id",
    "data",
    "request_id",
    "ip",
]
TOOL_CALL_COLUMNS = [
    "id",
    "created_at",
    "agent",
    "tool",
    "resolved_tool",
    "decision",
    "status",
    "error",
    "duration_ms",
    "for_llm_bytes",
    "for_user_bytes",
    "session_key",
    "run_id",
    "user_id",
    "channel",
    "chat_id",
    "origin",
    "provider",
    "subagent_depth",
    "actor_kind",
    "actor_id",
    "request_id",
    "args",
]


def audit_row(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": str(event.pk),
        "created_at": event.created_at.isoformat(),
        "actor_kind": event.actor_kind,
        "actor_id": event.actor_id,
        "actor_label": event.actor_label,
        "verb": event.verb,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "data": event.data,
        "request_id": event.request_id,
        "ip": event.ip,
    }


def tool_call_row(call: ToolCall) -> dict[str, Any]:
    own = (name for name in TOOL_CALL_COLUMNS if name not in {"id", "created_at", "agent"})
    row = {name: getattr(call, name) for name in own}
    return {"id": str(call.pk), "created_at": call.created_at.isoformat(), "agent": call.agent_key, **row}


def csv_cell(value: Any) -> str:
    """``value`` as a CSV cell's text: JSON for structures, and never a formula."""
    if value is None:
        text = ""
    elif isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True, cls=DjangoJSONEncoder)
    else:
        text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def stream(
    queryset: QuerySet[Any],
    *,
    fmt: str,
    columns: list[str],
    to_row: Callable[[Any], dict[str, Any]],
    on_finish: Callable[[int, bool], None] | None = None,
) -> Iterator[str]:
    """The rows of ``queryset`` (at most ``EXPORT_LIMIT``) in ``fmt``, a chunk of text at a time; once
    every row is written, ``on_finish(rows, truncated)`` (not for a download given up half-way)."""
    truncated = False
    written = 0
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if fmt == "csv":
        writer.writerow(columns)
        yield _take(buffer)
    for count, obj in enumerate(queryset[: EXPORT_LIMIT + 1].iterator(chunk_size=CHUNK_SIZE)):
        if count == EXPORT_LIMIT:
            truncated = True
            break
        row = to_row(obj)
        written += 1
        if fmt == "csv":
            writer.writerow([csv_cell(row[name]) for name in columns])
        else:
            buffer.write(json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n")
        if count % ROWS_PER_CHUNK == ROWS_PER_CHUNK - 1:
            yield _take(buffer)
    if buffer.tell():
        yield _take(buffer)
    if truncated:
        if fmt == "csv":
            writer.writerow([f"# truncated: an export holds at most {EXPORT_LIMIT} rows"])
            yield _take(buffer)
        else:
            yield json.dumps({"truncated": True, "limit": EXPORT_LIMIT}) + "\n"
    if on_finish is not None:
        on_finish(written, truncated)


def _take(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


LOGS: dict[str, tuple[list[str], Callable[[Any], dict[str, Any]]]] = {
    "audit": (AUDIT_COLUMNS, audit_row),
    "tool_calls": (TOOL_CALL_COLUMNS, tool_call_row),
}


def is_asgi(request: Any) -> bool:
    """Whether ``request`` (Django's or DRF's) came through the ASGI handler."""
    return isinstance(getattr(request, "_request", request), ASGIRequest)


# Chunks (of ROWS_PER_CHUNK rows) read per hop to the database thread when served asynchronously.
BATCH_CHUNKS = 20


def _next_batch(chunks: Iterator[str]) -> str | None:
    """Up to ``BATCH_CHUNKS`` chunks of ``chunks`` as one text, or None once it is exhausted."""
    batch = [chunk for _, chunk in zip(range(BATCH_CHUNKS), chunks, strict=False)]
    return "".join(batch) if batch else None


async def _async_stream(chunks: Iterator[str]) -> AsyncIterator[str]:
    """``chunks`` read in the thread that holds the request's database connection (the ORM is sync),
    a batch at a time, so that an ASGI server sends them as they come instead of buffering them all."""
    while (batch := await sync_to_async(_next_batch, thread_sensitive=True)(chunks)) is not None:
        yield batch


def response(
    queryset: QuerySet[Any],
    *,
    log: str,
    fmt: str,
    asynchronous: bool,
    on_finish: Callable[[int, bool], None] | None = None,
) -> StreamingHttpResponse:
    """A download of ``queryset``'s rows of ``log`` in ``fmt``, streamed (``asynchronous``: for an ASGI
    request, where a sync iterator would be read whole before the first byte is sent); ``on_finish`` as
    for :func:`stream` (called in the thread that reads the rows)."""
    columns, to_row = LOGS[log]
    chunks = stream(queryset, fmt=fmt, columns=columns, to_row=to_row, on_finish=on_finish)
    result = StreamingHttpResponse(
        _async_stream(chunks) if asynchronous else chunks, content_type=FORMATS[fmt]
    )
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    result["Content-Disposition"] = f'attachment; filename="{log.replace("_", "-")}-{stamp}.{fmt}"'
    result["X-Export-Limit"] = str(EXPORT_LIMIT)
    result["Cache-Control"] = "no-store"
    return result
