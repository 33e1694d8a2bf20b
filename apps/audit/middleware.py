"""Request id, client address and body-size limit for every request."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from apps.audit import context

logger = logging.getLogger("toolgate.request")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def _error(status: int, code: str, message: str, request_id: str) -> HttpResponse:
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}})
    response = HttpResponse(body, status=status, content_type="application/json")
    response["X-Request-ID"] = request_id
    return response


class RequestContextMiddleware:
    """Gives each request an id (a well-formed incoming ``X-Request-ID`` is kept), logs one line per
    request, and refuses bodies over ``MAX_REQUEST_BODY_BYTES`` before anything reads them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = context.bind(
            context.RequestContext(request_id=request_id, ip=request.META.get("REMOTE_ADDR"))
        )
        started = time.monotonic()
        try:
            length = request.META.get("CONTENT_LENGTH") or "0"
            try:
                too_large = int(length) > settings.MAX_REQUEST_BODY_BYTES
            except ValueError:
                return _error(400, "invalid", "Content-Length is not a number.", request_id)
            if too_large:
                response = _error(
                    413,
                    "body_too_large",
                    f"Request body is larger than the limit of {settings.MAX_REQUEST_BODY_BYTES} bytes.",
                    request_id,
                )
            else:
                response = self.get_response(request)
            response["X-Request-ID"] = request_id
            logger.info(
                "%s %s %s",
                request.method,
                request.path,
                response.status_code,
                extra={
                    "status": response.status_code,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
            return response
        finally:
            context.reset(token)
