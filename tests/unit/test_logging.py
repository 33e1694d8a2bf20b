"""Logs are one JSON object a line, carrying the request id of the request that wrote them."""

from __future__ import annotations

import json
import logging

import pytest

pytestmark = pytest.mark.django_db


def _console_handler() -> logging.Handler:
    handlers = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h.formatter, logging.Formatter)
        and type(h.formatter).__module__.startswith("pythonjsonlogger")
    ]
    assert handlers, "the console handler with the JSON formatter is configured"
    return handlers[0]


def test_request_log_line_is_json_with_the_request_id(admin_a, caplog):
    with caplog.at_level(logging.INFO, logger="toolgate.request"):
        response = admin_a.get("/api/v1/me/", HTTP_X_REQUEST_ID="trace-abc-123456")
    assert response["X-Request-ID"] == "trace-abc-123456"
    [record] = [r for r in caplog.records if r.name == "toolgate.request"]
    handler = _console_handler()
    assert handler.filter(record)
    line = json.loads(handler.format(record))
    assert line["message"] == "GET /api/v1/me/ 200"
    assert line["request_id"] == "trace-abc-123456"
    assert line["level"] == "INFO"
    assert line["status"] == 200
    assert "Authorization" not in json.dumps(line)
    assert "tgk_" not in json.dumps(line)


def test_a_malformed_incoming_request_id_is_replaced(admin_a):
    response = admin_a.get("/api/v1/me/", HTTP_X_REQUEST_ID="bad id\nwith newline")
    assert response["X-Request-ID"] != "bad id\nwith newline"
    assert len(response["X-Request-ID"]) == 32
