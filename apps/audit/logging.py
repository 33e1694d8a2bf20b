"""Adds the request id and tenant to every log record (structured JSON logs)."""

from __future__ import annotations

import logging

from apps.audit import context


class RequestContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        ctx = context.current()
        record.request_id = getattr(record, "request_id", None) or ctx.request_id or None
        record.tenant = getattr(record, "tenant", None) or ctx.tenant or None
        return True
